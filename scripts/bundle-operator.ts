// `node scripts/bundle-operator.ts [DIST]` (after `tsc -p tsconfig.build.json`; `npm run build` and the Dockerfile run
// both): replaces DIST/cli/operator.js (default dist/) with one file holding it and everything it imports, our
// modules and the npm packages alike, so `mds operator` loads one module instead of 433. V8 keeps a record and
// the source text of every module it loads; one module without comments, in ASCII (a source with any character above
// U+00FF is kept at two bytes a character), is 4-5 MB less RSS for the running operator
// (bench/history/2026-11-26-operator-memory-2.md). Names are kept (no minifying): stack traces read as the sources do.
// What stays outside: Node's built-ins, and the YAML parser, which src/kube/kubeconfig.ts requires at run time only
// when it reads a kubeconfig file (a pod reads none); it resolves from node_modules as before. The other commands
// (service, token, crds) keep loading dist/'s modules as compiled: only the operator's entry is replaced.
import { rm } from "node:fs/promises";
import { builtinModules } from "node:module";
import path from "node:path";
import { build } from "rolldown";

export async function bundleOperator(distDir: string): Promise<void> {
  const entry = path.join(distDir, "cli", "operator.js");
  await build({
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
}

if (import.meta.main) await bundleOperator(path.resolve(process.argv[2] ?? "dist"));
