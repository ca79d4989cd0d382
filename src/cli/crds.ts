import { mkdir, readFile, writeFile, readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { renderCrdBundle, renderCrdFiles } from "../resources/crd-files.ts";

export const crdsHelp = `usage: mds crds [--out <dir>] [--check] [--stdout]

Writes the CustomResourceDefinitions of every kind of src/resources/index.ts, generated from
src/resources/*/schema.ts, into <dir> (default: crds), with the Kustomization that lists them.

  --out <dir>   directory to write to (default: crds)
  --check       write nothing; exit 1 and name the files that differ from the schemas
  --stdout      print all CRDs as one YAML stream (for kubectl apply -f -)`;

/** crds/Kustomization: lets `kubectl apply -k deploy/` include exactly the generated files without copying them. */
export function kustomizationOf(files: Iterable<string>): string {
  return [
    "# Lets `kubectl apply -k deploy/` include the CRDs without copying them (kustomize only loads files inside a",
    "# kustomization's root). Named `Kustomization`, not *.yaml, so `kubectl apply -f crds/` and `mds crds --check`",
    "# ignore it. Written by `mds crds` with the CRDs; test/deploy checks that it lists exactly the generated *.yaml files.",
    "apiVersion: kustomize.config.k8s.io/v1beta1",
    "kind: Kustomization",
    "resources:",
    ...[...files].sort().map((f) => `  - ${f}`),
    "",
  ].join("\n");
}

// Files in `dir` that differ from what the schemas generate; stale generated files count too.
export async function findCrdDrift(dir: string): Promise<string[]> {
  const expected = renderCrdFiles();
  const drift: string[] = [];
  for (const [name, text] of expected) {
    const actual = await readFile(join(dir, name), "utf8").catch(() => undefined);
    if (actual !== text) drift.push(name);
  }
  const kustomization = await readFile(join(dir, "Kustomization"), "utf8").catch(() => undefined);
  if (kustomization !== kustomizationOf(expected.keys())) drift.push("Kustomization");
  const present = await readdir(dir).catch(() => [] as string[]);
  for (const name of present) if (name.endsWith(".yaml") && !expected.has(name)) drift.push(name);
  return drift.sort();
}

export async function writeCrdFiles(dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const expected = renderCrdFiles();
  for (const [name, text] of expected) await writeFile(join(dir, name), text);
  await writeFile(join(dir, "Kustomization"), kustomizationOf(expected.keys()));
  // Remove generated files of kinds that no longer exist, so `kubectl apply -f crds/` matches the schemas.
  for (const name of await readdir(dir)) {
    if (name.endsWith(".yaml") && !expected.has(name)) await rm(join(dir, name));
  }
  return [...expected.keys()];
}

export async function runCrds(argv: string[]): Promise<number> {
  let values: {
    out?: string | undefined;
    check?: boolean | undefined;
    stdout?: boolean | undefined;
    help?: boolean | undefined;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        out: { type: "string" },
        check: { type: "boolean" },
        stdout: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (err) {
    console.error(`mds crds: ${err instanceof Error ? err.message : String(err)}\n\n${crdsHelp}`);
    return 2;
  }
  if (values.help) {
    console.log(crdsHelp);
    return 0;
  }
  if (values.stdout) {
    process.stdout.write(renderCrdBundle());
    return 0;
  }
  const dir = resolve(values.out ?? "crds");
  if (values.check) {
    const drift = await findCrdDrift(dir);
    if (drift.length > 0) {
      console.error(`mds crds: ${dir} is out of date with the schemas: ${drift.join(", ")}; run \`npm run crds\``);
      return 1;
    }
    console.log(`mds crds: ${dir} matches the schemas`);
    return 0;
  }
  const written = await writeCrdFiles(dir);
  console.log(`mds crds: wrote ${written.map((n) => join(dir, n)).join(", ")}`);
  return 0;
}
