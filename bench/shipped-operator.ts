// The operator as the image ships it, for benchmarks that start it as a process (dev/stack.ts's `entry`): src/
// compiled as the Dockerfile does (tsc -p tsconfig.build.json, the operator's entry bundled by
// scripts/bundle-operator.ts, then the non-TypeScript files), laid out as /app is
// (dist/, node_modules, package.json, bin/mds.js from deploy/image/), and the image's environment (NODE_ENV and the
// glibc malloc settings of the Dockerfile's ENV line). node_modules is the repository's (dev dependencies too: they
// are never imported by dist/, so they cost the process nothing).
import { execFileSync } from "node:child_process";
import { copyFile, cp, mkdir, readFile, symlink } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundleOperator } from "../scripts/bundle-operator.ts";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface ShippedOperator {
  /** The `mds` entry script: <app>/bin/mds.js, importing ../dist/cli/main.js. */
  entry: string;
  /** The image's environment. */
  env: Record<string, string>;
  /** Where dist/ came from, for the report. */
  source: string;
}

/** Lays out `appDir` as the image's /app; compiles src/ into it unless `dist` names a compiled directory (`npm run build`). */
export async function shippedOperator(appDir: string, dist?: string): Promise<ShippedOperator> {
  await mkdir(path.join(appDir, "bin"), { recursive: true });
  const distDir = path.join(appDir, "dist");
  // Before the bundle: it resolves the npm packages from here, as the Dockerfile's build stage does.
  await symlink(path.join(repoRoot, "node_modules"), path.join(appDir, "node_modules"));
  let source: string;
  if (dist !== undefined) {
    await symlink(path.resolve(dist), distDir);
    source = `${path.resolve(dist)} (given)`;
  } else {
    const started = performance.now();
    execFileSync(
      process.execPath,
      [
        path.join(repoRoot, "node_modules/typescript/bin/tsc"),
        "-p",
        path.join(repoRoot, "tsconfig.build.json"),
        "--outDir",
        distDir,
        "--sourceMap",
        "false",
      ],
      { stdio: "inherit" },
    );
    await bundleOperator(distDir);
    // The Dockerfile's `find . -type f ! -name '*.ts' -exec cp --parents`: SQL migrations and the like.
    await cp(path.join(repoRoot, "src"), distDir, { recursive: true, filter: (p) => !p.endsWith(".ts") });
    source = `src/ compiled in ${((performance.now() - started) / 1000).toFixed(1)} s`;
  }
  await copyFile(path.join(repoRoot, "package.json"), path.join(appDir, "package.json"));
  await copyFile(path.join(repoRoot, "deploy/image/mds.js"), path.join(appDir, "bin/mds.js"));
  return {
    entry: path.join(appDir, "bin/mds.js"),
    env: { NODE_ENV: "production", ...(await imageMallocEnv()) },
    source,
  };
}

/** The glibc malloc settings the image runs with (the Dockerfile's `ENV MALLOC_…` line). */
async function imageMallocEnv(): Promise<Record<string, string>> {
  const line = /^ENV (MALLOC_.+)$/m.exec(await readFile(path.join(repoRoot, "Dockerfile"), "utf8"))?.[1] ?? "";
  return Object.fromEntries(
    line
      .split(/\s+/)
      .filter((kv) => kv.includes("="))
      .map((kv) => kv.split("=") as [string, string]),
  );
}
