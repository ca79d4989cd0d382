// `npm run docs:reference`: writes every documentation page (or block) generated from the code. `--check` writes
// nothing and exits 1 naming the files that differ; test/docs/generated.test.ts runs the same comparison.
import { readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { cliDoc, renderCli } from "./cli.ts";
import { conditionsDoc, renderConditions, renderTroubleshooting, troubleshootingDoc } from "./conditions.ts";
import { crashPointsDoc, renderCrashPoints } from "./crash-points.ts";
import { referencePath, renderReference } from "./crd-reference.ts";
import { metricsDocPath, renderMetricsDoc } from "./metrics.ts";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Every generated document: its path from the repository root and its content as the code says it. */
export async function generatedDocs(): Promise<{ path: string; text: string }[]> {
  return [
    { path: relative(repoRoot, referencePath), text: await renderReference() },
    { path: relative(repoRoot, metricsDocPath), text: await renderMetricsDoc() },
    { path: conditionsDoc, text: renderConditions() },
    { path: troubleshootingDoc, text: await renderTroubleshooting(repoRoot) },
    { path: crashPointsDoc, text: renderCrashPoints() },
    { path: cliDoc, text: renderCli() },
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes("--check");
  let drifted = 0;
  for (const doc of await generatedDocs()) {
    const file = join(repoRoot, doc.path);
    const current = await readFile(file, "utf8").catch(() => "");
    if (current === doc.text) continue;
    if (check) {
      console.error(`${doc.path} differs from the code: run npm run docs:reference`);
      drifted++;
    } else {
      await writeFile(file, doc.text);
      console.log(`wrote ${doc.path}`);
    }
  }
  process.exitCode = drifted > 0 ? 1 : 0;
}
