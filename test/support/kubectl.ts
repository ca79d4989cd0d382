import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { kubectlPath } from "@mds/devkube/kubectl-path";

// Runs the real kubectl 1.32 (packages/devkube/src/kubectl-path.ts) against a kubeconfig, in a fixed environment.

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runKubectl(
  kubeconfig: string,
  args: string[],
  opts: { input?: string; cacheDir?: string } = {},
): Promise<KubectlResult> {
  const bin = await kubectlPath();
  const full = [`--kubeconfig=${kubeconfig}`, ...(opts.cacheDir ? [`--cache-dir=${opts.cacheDir}`] : []), ...args];
  return new Promise((resolve, reject) => {
    // a fixed environment: no KUBECONFIG or ~/.kube of the machine leaks into a test
    const child = spawn(bin, full, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: opts.cacheDir ?? tmpdir() },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.end(opts.input ?? "");
  });
}
