import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Devkube } from "@mds/devkube";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { parseKubeConfig } from "../kube/kubeconfig.ts";
import type { KubeObject } from "../kube/types.ts";
import { DatabaseType, ProjectType } from "../resources/types.ts";
import { runKubectl } from "../../test/support/kubectl.ts";
import { startDevkubeWithCrds, type DevkubeWithCrds } from "../../test/support/devkube-with-crds.ts";
import { main } from "./main.ts";

// `mds prepare-rollback` against devkube: it removes exactly the conditions the older release does not know, from
// every namespace, and touches nothing else (an object without such a condition keeps its resourceVersion).
describe("mds prepare-rollback", () => {
  let dir = "";
  let devkube: Devkube;
  let cluster: DevkubeWithCrds | undefined;
  let kube: KubeClient;
  const condition = (type: string) => ({
    type,
    status: "True",
    reason: "ReconcileSuccess",
    message: "",
    lastTransitionTime: "2026-12-01T00:00:00Z",
  });
  const run = async (args: string[]) => {
    const out: string[] = [];
    const log = vi.spyOn(console, "log").mockImplementation((line: string) => void out.push(line));
    const error = vi.spyOn(console, "error").mockImplementation((line: string) => void out.push(line));
    try {
      return { code: await main(["prepare-rollback", ...args]), out: out.join("\n") };
    } finally {
      log.mockRestore();
      error.mockRestore();
    }
  };
  const get = async (type: typeof DatabaseType, ns: string, name: string) =>
    (await kube.get<KubeObject & { status?: { conditions?: { type: string }[] } }>(type, ns, name))!;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-prepare-rollback-"));
    cluster = await startDevkubeWithCrds({ dir: join(dir, "kube") });
    devkube = cluster.devkube;
    kube = createKubeClient(parseKubeConfig(devkube.kubeconfig));
    expect((await runKubectl(devkube.kubeconfigPath, ["create", "namespace", "team-b"])).code).toBe(0);
    const create = async (type: typeof DatabaseType, ns: string, name: string, spec: object, types: string[]) => {
      const obj = await kube.create<KubeObject>(type, {
        apiVersion: "mds.dev/v1alpha1",
        kind: type.kind,
        metadata: { name, namespace: ns },
        spec,
      } as KubeObject);
      await kube.patchStatus(type, ns, name, {
        metadata: { resourceVersion: obj.metadata.resourceVersion },
        status: { id: `id-${name}`, conditions: types.map(condition) },
      });
    };
    await create(DatabaseType, "default", "orders", { projectRef: { name: "shop" } }, [
      "Ready",
      "Synced",
      "Hibernating",
    ]);
    await create(DatabaseType, "team-b", "billing", { projectRef: { name: "shop" } }, ["Ready", "Stalled", "Expired"]);
    await create(ProjectType, "default", "shop", { region: "us-east-1" }, ["Ready", "Synced"]);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses a release it does not know and a bad list, changing nothing", async () => {
    expect(await run(["--to", "0.2.0", "--kubeconfig", devkube.kubeconfigPath])).toMatchObject({
      code: 2,
      out: expect.stringContaining("from 0.2.0 on an operator reads what it does not know"),
    });
    expect((await run(["--keep-conditions", "Ready,{bad}", "--kubeconfig", devkube.kubeconfigPath])).code).toBe(2);
    expect((await run(["--kubeconfig", devkube.kubeconfigPath])).code).toBe(2);
    expect((await get(DatabaseType, "default", "orders")).status?.conditions?.map((c) => c.type)).toEqual([
      "Ready",
      "Synced",
      "Hibernating",
    ]);
  });

  it("with --dry-run names what it would remove and removes nothing", async () => {
    const before = (await get(DatabaseType, "default", "orders")).metadata.resourceVersion;
    const result = await run(["--to", "0.1.0", "--dry-run", "--kubeconfig", devkube.kubeconfigPath]);
    expect(result.code).toBe(0);
    expect(result.out).toContain("databases.mds.dev default/orders: would remove Hibernating");
    expect((await get(DatabaseType, "default", "orders")).metadata.resourceVersion).toBe(before);
  });

  it("removes only the unknown conditions, in every namespace, and leaves every other object as it was", async () => {
    const shopVersion = (await get(ProjectType, "default", "shop")).metadata.resourceVersion;
    const result = await run(["--keep-conditions", "Ready,Synced,Stalled", "--kubeconfig", devkube.kubeconfigPath]);
    expect(result).toMatchObject({ code: 0 });
    expect(result.out).toContain("databases.mds.dev default/orders: removed Hibernating");
    expect(result.out).toContain("databases.mds.dev team-b/billing: removed Expired");
    const orders = await get(DatabaseType, "default", "orders");
    expect(orders.status?.conditions?.map((c) => c.type)).toEqual(["Ready", "Synced"]);
    expect((orders.status as Record<string, unknown>)["id"]).toBe("id-orders");
    expect((await get(DatabaseType, "team-b", "billing")).status?.conditions?.map((c) => c.type)).toEqual([
      "Ready",
      "Stalled",
    ]);
    expect((await get(ProjectType, "default", "shop")).metadata.resourceVersion).toBe(shopVersion);
    // A second run finds nothing to do.
    expect(
      (await run(["--keep-conditions", "Ready,Synced,Stalled", "--kubeconfig", devkube.kubeconfigPath])).out,
    ).toContain("0 resource(s) changed");
  });
});
