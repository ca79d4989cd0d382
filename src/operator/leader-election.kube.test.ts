import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { parseKubeConfig } from "../kube/kubeconfig.ts";
import pino from "pino";
import { startDevkube, type Devkube } from "@mds/devkube";
import { eventually } from "../../test/support/eventually.ts";
import { runKubectl } from "../../test/support/kubectl.ts";
import { createLeaderElector, createLeaseClient } from "./leader-election.ts";

// Two electors on a real coordination/v1 Lease (devkube enforces MicroTime's six digits and resourceVersion
// conflicts as a real apiserver does).
describe("leader election on a real Lease", () => {
  let dir = "";
  let kube: Devkube;
  let client: KubeClient;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-lease-"));
    kube = await startDevkube({ dir: join(dir, "kube") });
    client = createKubeClient(parseKubeConfig(kube.kubeconfig));
  });
  afterAll(async () => {
    await kube?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("one replica leads, the other takes over when it releases", async () => {
    const logger = pino({ level: "silent" });
    const lease = () => createLeaseClient(client, "default", "mds-operator");
    const a = createLeaderElector({ lease: lease(), identity: "replica-a", logger });
    const b = createLeaderElector({ lease: lease(), identity: "replica-b", logger });
    a.start();
    await eventually(() => expect(a.isLeader()).toBe(true));
    b.start();
    await eventually(() => expect(b.observedLeader()).toBe("replica-a"));
    expect(b.isLeader()).toBe(false);

    const got = await runKubectl(kube.kubeconfigPath, ["get", "lease", "mds-operator", "-o", "json"], {
      cacheDir: join(dir, "kubectl"),
    });
    const spec = (JSON.parse(got.stdout) as { spec: Record<string, unknown> }).spec;
    expect(spec.holderIdentity).toBe("replica-a");
    expect(spec.leaseDurationSeconds).toBe(15);
    expect(spec.renewTime).toMatch(/\.\d{6}Z$/);
    expect(spec.acquireTime).toMatch(/\.\d{6}Z$/);

    await a.stop();
    expect(a.isLeader()).toBe(false);
    await eventually(() => expect(b.isLeader()).toBe(true));
    await b.stop();
  });
});
