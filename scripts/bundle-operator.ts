// `node scripts/bundle-operator.ts [DIST]` (after `tsc -p tsconfig.build.json`; `npm run build` and the Dockerfile run
// both): replaces DIST/cli/operator.js (default dist/), and DIST/cli/webhook.js the same way, with one file holding it and everything it imports, our
// modules and the npm packages alike, so `mds operator` loads one module instead of 433. V8 keeps a record and
// the source text of every module it loads; one module without comments, in ASCII (a source with any character above
// U+00FF is kept at two bytes a character), is 4-5 MB less RSS for the running operator
// (bench/history/2026-11-26-operator-memory-2.md). Names are kept (no minifying): stack traces read as the sources do.
// What stays outside: Node's built-ins, and the YAML parser, which src/kube/kubeconfig.ts requires at run time only
// when it reads a kubeconfig file (a pod reads none); it resolves from node_modules as before. The other commands
// (service, token, crds) keep loading dist/'s modules as compiled: only the operator's entry is replaced.
// Beside it, dist/cli/operator.packages.json lists the npm packages whose code the bundle holds (name and version,
// read from each package's own package.json), so the operator image's SBOM can name code that is in no node_modules.
import { readFile, rm, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import path from "node:path";
import { build } from "rolldown";

/** Where the operator bundle's list of the npm packages it inlined is written, beside the bundle. */
export const bundledPackagesFile = "operator.packages.json";

/** The commands the operator image runs: `mds operator`, and `mds webhook` (the conversion webhook's Deployment). */
export const bundledCommands = ["operator", "webhook"];

export async function bundleOperator(distDir: string): Promise<void> {
  const moduleIds: string[] = [];
  for (const command of bundledCommands) {
    const entry = path.join(distDir, "cli", `${command}.js`);
    const output = await build({
      input: entry,
      platform: "node",
      external: [/^node:/, ...builtinModules],
      logLevel: "warn",
      output: {
        file: entry,
        format: "esm",
        codeSplitting: false,
        comments: false,
        charset: "ascii",
        sourcemap: false,
      },
    });
    // tsc's map describes the file this one replaced.
    await rm(`${entry}.map`, { force: true });
    moduleIds.push(...output.output.flatMap((o) => (o.type === "chunk" ? o.moduleIds : [])));
  }
  // One list for both bundles: the image's SBOM names every package whose code either holds.
  const packages = await packagesOf(moduleIds);
  await writeFile(path.join(distDir, "cli", bundledPackagesFile), `${JSON.stringify(packages, null, 2)}\n`);
}

/** The npm packages the modules come from: the innermost node_modules/<name> (or <@scope/name>) of each path. */
async function packagesOf(moduleIds: string[]): Promise<{ name: string; version: string }[]> {
  const roots = new Set<string>();
  for (const id of moduleIds) {
    const m = /^(.*\/node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(id.replaceAll("\\", "/"));
    if (m?.[1] !== undefined) roots.add(m[1]);
  }
  const found = new Map<string, { name: string; version: string }>();
  for (const root of roots) {
    const pkg = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as {
      name: string;
      version: string;
    };
    found.set(`${pkg.name}@${pkg.version}`, { name: pkg.name, version: pkg.version });
  }
  return [...found.values()].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
}

if (import.meta.main) await bundleOperator(path.resolve(process.argv[2] ?? "dist"));
