import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { commandKubeConfig } from "./kube-config.ts";

const kubeconfigAt = (dir: string, name: string, server: string) => {
  const file = join(dir, name);
  writeFileSync(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "current-context: c",
      "contexts: [{ name: c, context: { cluster: k, user: u } }]",
      `clusters: [{ name: k, cluster: { server: "${server}" } }]`,
      "users: [{ name: u, user: { token: t } }]",
    ].join("\n"),
  );
  return file;
};

describe("commandKubeConfig: the kubeconfig of mds webhook, migrate-storage and prepare-rollback", () => {
  const dir = mkdtempSync(join(tmpdir(), "mds-kubeconfig-"));
  const fromFlag = kubeconfigAt(dir, "flag", "https://flag.example:6443");
  const fromEnv = kubeconfigAt(dir, "env", "https://env.example:6443");
  const server = (c: ReturnType<typeof commandKubeConfig>) => c?.server;

  it("takes --kubeconfig over KUBECONFIG, and KUBECONFIG over the in-cluster config a pod has", () => {
    const reports: string[] = [];
    const inPod = { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBECONFIG: fromEnv, HOME: dir };
    expect(server(commandKubeConfig({ kubeconfig: fromFlag }, (m) => reports.push(m), inPod))).toBe(
      "https://flag.example:6443",
    );
    expect(server(commandKubeConfig({}, (m) => reports.push(m), inPod))).toBe("https://env.example:6443");
    expect(reports).toEqual([]);
  });

  it("reports a configuration it cannot load in one line and gives undefined (the command exits 2)", () => {
    const reports: string[] = [];
    expect(commandKubeConfig({ kubeconfig: join(dir, "missing") }, (m) => reports.push(m), { HOME: dir })).toBe(
      undefined,
    );
    expect(commandKubeConfig({}, (m) => reports.push(m), { HOME: dir })).toBe(undefined);
    expect(reports).toEqual([
      expect.stringMatching(/^cannot read kubeconfig .*missing/),
      "no Kubernetes cluster configured: pass --kubeconfig or set KUBECONFIG",
    ]);
  });
});
