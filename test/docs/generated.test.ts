// Every page generated from the code (scripts/docs/generate.ts: CRD fields, condition reasons, crash points, metrics,
// command flags) is what the code says today. On failure: npm run docs:reference, and commit the result.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generatedDocs, repoRoot } from "../../scripts/docs/generate.ts";

describe("generated documentation (npm run docs:reference)", async () => {
  const docs = await generatedDocs();

  it("covers the CRD reference, condition reasons and the troubleshooting table, crash points, metrics and flags", () => {
    expect(docs.map((d) => d.path).sort()).toEqual([
      "docs/cli.md",
      "docs/conditions.md",
      "docs/crash-points.md",
      "docs/metrics.md",
      "docs/reference.md",
      "docs/troubleshooting.md",
    ]);
  });

  it.each(docs.map((d) => [d.path, d.text]))("%s matches the code", async (path, text) => {
    expect(await readFile(join(repoRoot, path), "utf8")).toBe(text);
  });
});
