import { afterEach, describe, expect, it } from "vitest";
import { isObj, metaOf, type Obj } from "./types.ts";
import { condition, controllerOf, STORAGE, uidOf } from "./workload-context.ts";
import { startKit, type Kit } from "./workload-test-kit.ts";

// The Deployment and ReplicaSet controllers with devkube's kubelet, in process: names, hashes, revisions, owner
// references, the bounds of a RollingUpdate, Recreate, paused, minReadySeconds, revisionHistoryLimit and the
// conditions kubectl reads.

let kit: Kit;
afterEach(() => kit?.close());

const deployment = (name: string, spec: Obj = {}, template: Obj = {}): Obj => ({
  metadata: { name },
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name }, ...template },
      spec: { containers: [{ name: "app", image: "example/app:1", env: [{ name: "A", value: "1" }] }] },
    },
    ...spec,
  },
});

const status = (o: Obj | undefined): Obj => (o && isObj(o["status"]) ? o["status"] : {});
const annotations = (o: Obj): Obj => (metaOf(o)["annotations"] as Obj | undefined) ?? {};
const names = (pods: Obj[]): string[] => pods.map((p) => String(metaOf(p)["name"])).sort();
const replicaSetsOf = (d: Obj): Obj[] => kit.list("replicasets").filter((rs) => controllerOf(rs)?.["uid"] === uidOf(d));

/** Resolves when the Deployment has rolled out its current generation (what `kubectl rollout status` waits for). */
function rolledOut(name: string) {
  return kit.until(`deployment ${name} rolled out`, () => {
    const d = kit.get("deployments", name);
    if (!d) return false;
    const s = status(d);
    const want = Number((d["spec"] as Obj)["replicas"]);
    const done =
      Number(s["observedGeneration"] ?? 0) >= Number(metaOf(d)["generation"]) &&
      Number(s["updatedReplicas"] ?? 0) === want &&
      Number(s["replicas"] ?? 0) === want &&
      Number(s["availableReplicas"] ?? 0) === want;
    return done && d;
  });
}

describe("Deployment → ReplicaSet → Pod", () => {
  it("creates <deployment>-<hash> with revision 1 and its pods <rs>-<5 chars>, owned and labelled, Running and Ready", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("web"));
    const d = await rolledOut("web");
    const [rs, ...more] = replicaSetsOf(d);
    expect(more).toHaveLength(0);
    const hash = String((metaOf(rs as Obj)["labels"] as Obj)["pod-template-hash"]);
    expect(hash).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]{6,10}$/);
    expect(metaOf(rs as Obj)["name"]).toBe(`web-${hash}`);
    expect(annotations(rs as Obj)).toMatchObject({
      "deployment.kubernetes.io/revision": "1",
      "deployment.kubernetes.io/desired-replicas": "3",
      "deployment.kubernetes.io/max-replicas": "4",
    });
    expect(annotations(d)["deployment.kubernetes.io/revision"]).toBe("1");
    expect(controllerOf(rs as Obj)).toMatchObject({ kind: "Deployment", name: "web", blockOwnerDeletion: true });
    expect((rs as Obj)["spec"]).toMatchObject({ selector: { matchLabels: { app: "web", "pod-template-hash": hash } } });
    const pods = kit.podsOf(rs as Obj);
    expect(pods).toHaveLength(3);
    for (const p of pods) {
      expect(metaOf(p)["name"]).toMatch(new RegExp(`^web-${hash}-[bcdfghjklmnpqrstvwxz2456789]{5}$`));
      expect(metaOf(p)["labels"]).toEqual({ app: "web", "pod-template-hash": hash });
      expect(controllerOf(p)).toMatchObject({
        apiVersion: "apps/v1",
        kind: "ReplicaSet",
        name: metaOf(rs as Obj)["name"],
      });
      expect(p["spec"]).toMatchObject({
        nodeName: "devkube-node",
        containers: [{ name: "app", image: "example/app:1", env: [{ name: "A", value: "1" }] }],
      });
      expect(status(p)).toMatchObject({ phase: "Running", podIP: expect.stringMatching(/^10\.244\./) });
      expect(condition(p, "Ready")?.["status"]).toBe("True");
    }
    expect(status(d)).toMatchObject({ replicas: 3, updatedReplicas: 3, readyReplicas: 3, availableReplicas: 3 });
    expect(status(d)["unavailableReplicas"]).toBeUndefined();
    expect(condition(d, "Available")).toMatchObject({ status: "True", reason: "MinimumReplicasAvailable" });
    expect(condition(d, "Progressing")).toMatchObject({
      status: "True",
      reason: "NewReplicaSetAvailable",
      message: `ReplicaSet "web-${hash}" has successfully progressed.`,
    });
  });

  it("rolls a template change within maxSurge and maxUnavailable (ints and percentages) and moves the revision", async () => {
    kit = startKit();
    for (const [name, rollingUpdate, replicas, surge, unavailable] of [
      ["ints", { maxSurge: 1, maxUnavailable: 0 }, 4, 1, 0],
      ["pct", { maxSurge: "50%", maxUnavailable: "50%" }, 4, 2, 2],
      ["defaults", undefined, 4, 1, 1],
    ] as const) {
      kit.apply(
        "deployments",
        deployment(name, {
          replicas,
          ...(rollingUpdate ? { strategy: { type: "RollingUpdate", rollingUpdate } } : {}),
        }),
      );
      const first = await rolledOut(name);
      let maxTotal = 0;
      let minAvailable = Infinity;
      const off = kit.everyEvent(() => {
        const all = replicaSetsOf(first);
        maxTotal = Math.max(
          maxTotal,
          all.reduce((n, rs) => n + Number((rs["spec"] as Obj)["replicas"]), 0),
        );
        minAvailable = Math.min(
          minAvailable,
          all.reduce((n, rs) => n + Number(status(rs)["availableReplicas"] ?? 0), 0),
        );
      });
      kit.patch("deployments", name, { spec: { template: { metadata: { annotations: { change: "1" } } } } });
      const d = await rolledOut(name);
      off();
      expect(maxTotal).toBe(replicas + surge);
      expect(minAvailable).toBeGreaterThanOrEqual(replicas - unavailable);
      expect(annotations(d)["deployment.kubernetes.io/revision"]).toBe("2");
      const sets = replicaSetsOf(d);
      expect(sets).toHaveLength(2);
      const fresh = sets.find((rs) => annotations(rs)["deployment.kubernetes.io/revision"] === "2") as Obj;
      expect(kit.podsOf(fresh)).toHaveLength(replicas);
      expect(sets.filter((rs) => rs !== fresh).every((rs) => (rs["spec"] as Obj)["replicas"] === 0)).toBe(true);
    }
  });

  it("Recreate: every old pod is gone before a new one exists", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("re", { strategy: { type: "Recreate" } }));
    const first = await rolledOut("re");
    const oldRs = replicaSetsOf(first)[0] as Obj;
    let overlap = false;
    const off = kit.everyEvent(() => {
      const pods = kit.list("pods");
      const hashes = new Set(pods.map((p) => (metaOf(p)["labels"] as Obj)["pod-template-hash"]));
      if (hashes.size > 1) overlap = true;
    });
    kit.patch("deployments", "re", { spec: { template: { metadata: { annotations: { change: "1" } } } } });
    await rolledOut("re");
    off();
    expect(overlap).toBe(false);
    expect(kit.podsOf(oldRs)).toHaveLength(0);
  });

  it("paused: a template change rolls nothing until resumed; Progressing says so", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("p", { replicas: 2 }));
    await rolledOut("p");
    kit.patch("deployments", "p", { spec: { paused: true } });
    await kit.until(
      "paused condition",
      () => condition(kit.get("deployments", "p") as Obj, "Progressing")?.["reason"] === "DeploymentPaused",
    );
    kit.patch("deployments", "p", { spec: { template: { metadata: { annotations: { change: "1" } } } } });
    const d = await kit.until("generation observed", () => {
      const o = kit.get("deployments", "p") as Obj;
      return status(o)["observedGeneration"] === metaOf(o)["generation"] && o;
    });
    expect(replicaSetsOf(d)).toHaveLength(1);
    expect(condition(d, "Progressing")).toMatchObject({ status: "Unknown", message: "Deployment is paused" });
    kit.patch("deployments", "p", { spec: { paused: false } });
    const done = await rolledOut("p");
    expect(replicaSetsOf(done)).toHaveLength(2);
    expect(condition(done, "Progressing")?.["reason"]).toBe("NewReplicaSetAvailable");
  });

  it("scales: replicas up and down on the current ReplicaSet", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("s", { replicas: 1 }));
    await rolledOut("s");
    kit.patch("deployments", "s", { spec: { replicas: 4 } });
    let d = await rolledOut("s");
    expect(kit.podsOf(replicaSetsOf(d)[0] as Obj)).toHaveLength(4);
    kit.patch("deployments", "s", { spec: { replicas: 0 } });
    d = await kit.until("scaled to 0", () => {
      const o = kit.get("deployments", "s") as Obj;
      return status(o)["observedGeneration"] === metaOf(o)["generation"] && status(o)["replicas"] === undefined && o;
    });
    expect(kit.list("pods")).toHaveLength(0);
    expect(replicaSetsOf(d)).toHaveLength(1);
  });

  it("keeps revisionHistoryLimit old ReplicaSets, the oldest revisions deleted", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("h", { replicas: 1, revisionHistoryLimit: 1 }));
    await rolledOut("h");
    for (const n of ["1", "2", "3"]) {
      kit.patch("deployments", "h", { spec: { template: { metadata: { annotations: { n } } } } });
      await rolledOut("h");
    }
    const d = await kit.until("history trimmed", () => {
      const o = kit.get("deployments", "h") as Obj;
      return replicaSetsOf(o).length === 2 && o;
    });
    const revisions = replicaSetsOf(d)
      .map((rs) => annotations(rs)["deployment.kubernetes.io/revision"])
      .sort();
    expect(revisions).toEqual(["3", "4"]);
  });

  it("a template back to an old one reuses its ReplicaSet with a new revision", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("rb", { replicas: 1 }));
    const first = await rolledOut("rb");
    const original = metaOf(replicaSetsOf(first)[0] as Obj)["name"];
    kit.patch("deployments", "rb", { spec: { template: { metadata: { annotations: { v: "2" } } } } });
    await rolledOut("rb");
    kit.patch("deployments", "rb", { spec: { template: { metadata: { annotations: null } } } });
    const d = await rolledOut("rb");
    const rs = kit.get("replicasets", String(original)) as Obj;
    expect(annotations(rs)["deployment.kubernetes.io/revision"]).toBe("3");
    expect(annotations(d)["deployment.kubernetes.io/revision"]).toBe("3");
    expect((rs["spec"] as Obj)["replicas"]).toBe(1);
  });

  it("minReadySeconds: a ready pod counts as available only that long after it became ready", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("m", { replicas: 1, minReadySeconds: 1 }));
    const ready = await kit.until("ready", () => {
      const o = kit.get("deployments", "m") as Obj;
      return status(o)["readyReplicas"] === 1 && o;
    });
    expect(status(ready)["availableReplicas"]).toBeUndefined();
    expect(condition(ready, "Available")?.["status"]).toBe("False");
    const d = await rolledOut("m");
    const pod = kit.list("pods")[0] as Obj;
    const readySince = Date.parse(String(condition(pod, "Ready")?.["lastTransitionTime"]));
    expect(Date.now()).toBeGreaterThanOrEqual(readySince + 1000);
    expect(condition(d, "Available")?.["status"]).toBe("True");
  });

  it("a pod template whose pods never become ready: the rollout stops, old pods stay, ProgressDeadlineExceeded", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("stuck", { replicas: 2, progressDeadlineSeconds: 1 }));
    const first = await rolledOut("stuck");
    const oldRs = replicaSetsOf(first)[0] as Obj;
    kit.patch("deployments", "stuck", {
      spec: { template: { metadata: { annotations: { "devkube.mds.dev/ready": "false" } } } },
    });
    const d = await kit.until("deadline exceeded", () => {
      const o = kit.get("deployments", "stuck") as Obj;
      return condition(o, "Progressing")?.["reason"] === "ProgressDeadlineExceeded" && o;
    });
    expect(condition(d, "Progressing")).toMatchObject({
      status: "False",
      message: expect.stringMatching(/has timed out progressing\.$/),
    });
    // 25% of 2 rounds down to 0 unavailable: both old pods still serve, one new pod surges and stays unready
    expect(kit.podsOf(oldRs)).toHaveLength(2);
    const fresh = replicaSetsOf(d).find((rs) => uidOf(rs) !== uidOf(oldRs)) as Obj;
    const newPods = kit.podsOf(fresh);
    expect(newPods).toHaveLength(1);
    expect((newPods[0] as Obj)["status"]).toMatchObject({ phase: "Running" });
    expect(condition(newPods[0] as Obj, "Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady" });
    expect(status(d)).toMatchObject({ replicas: 3, updatedReplicas: 1, availableReplicas: 2, unavailableReplicas: 1 });
  });
});

describe("controller references", () => {
  it("a Deployment re-created after an orphaning delete adopts its ReplicaSet and pods; a relabelled pod is released", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("o", { replicas: 2 }));
    const first = await rolledOut("o");
    const rs = replicaSetsOf(first)[0] as Obj;
    const pods = names(kit.podsOf(rs));
    kit.api.delete(kit.registry.forStorageKey(STORAGE.deployment)!, "default", "o", {
      propagationPolicy: "Orphan",
      dryRun: false,
    });
    await kit.until("orphaned", () => {
      const r = kit.get("replicasets", String(metaOf(rs)["name"]));
      return r && controllerOf(r) === undefined && !kit.get("deployments", "o");
    });
    kit.apply("deployments", deployment("o", { replicas: 2 }));
    const again = await rolledOut("o");
    const sets = replicaSetsOf(again);
    expect(sets.map((r) => metaOf(r)["name"])).toEqual([metaOf(rs)["name"]]);
    expect(names(kit.podsOf(sets[0] as Obj))).toEqual(pods);

    const [loose] = pods;
    kit.patch("pods", String(loose), { metadata: { labels: { app: null } } });
    const after = await kit.until("replaced", () => {
      const owned = names(kit.podsOf(sets[0] as Obj));
      return owned.length === 2 && !owned.includes(String(loose)) && owned;
    });
    expect(after).toHaveLength(2);
    expect(controllerOf(kit.get("pods", String(loose)) as Obj)).toBeUndefined();
  });
});

describe("pod lifecycle", () => {
  it("with the kubelet off, pods are scheduled and stay Pending until a client reports them Running and Ready", async () => {
    kit = startKit({ kubelet: false });
    kit.apply("deployments", deployment("k", { replicas: 1 }));
    const pod = await kit.until("scheduled pod", () => {
      const p = kit.list("pods")[0];
      return p && (p["spec"] as Obj)["nodeName"] === "devkube-node" && condition(p, "PodScheduled") && p;
    });
    expect(status(pod)["phase"]).toBe("Pending");
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    kit.patch(
      "pods",
      String(metaOf(pod)["name"]),
      {
        status: {
          phase: "Running",
          conditions: [{ type: "Ready", status: "True", lastTransitionTime: now }],
        },
      },
      "default",
      "status",
    );
    await rolledOut("k");
  });

  it("the ready annotation on a pod is followed both ways", async () => {
    kit = startKit();
    kit.apply("pods", {
      metadata: { name: "solo", annotations: { "devkube.mds.dev/ready": "false" } },
      spec: { containers: [{ name: "app", image: "x" }] },
    });
    const running = await kit.until("running", () => {
      const p = kit.get("pods", "solo") as Obj;
      return status(p)["phase"] === "Running" && p;
    });
    expect(condition(running, "Ready")?.["status"]).toBe("False");
    kit.patch("pods", "solo", { metadata: { annotations: { "devkube.mds.dev/ready": null } } });
    await kit.until("ready", () => condition(kit.get("pods", "solo") as Obj, "Ready")?.["status"] === "True");
    kit.patch("pods", "solo", { metadata: { annotations: { "devkube.mds.dev/ready": "false" } } });
    await kit.until("unready", () => condition(kit.get("pods", "solo") as Obj, "Ready")?.["status"] === "False");
  });

  it("costs nothing without workload objects: no sync for other kinds' writes", () => {
    kit = startKit();
    for (let i = 0; i < 50; i++) kit.apply("configmaps", { metadata: { name: `c${i}` }, data: { a: "b" } });
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        expect(kit.workloads.syncs).toBe(0);
        resolve();
      }),
    );
  });

  it("a deleted pod is replaced by its ReplicaSet", async () => {
    kit = startKit();
    kit.apply("deployments", deployment("r", { replicas: 2 }));
    const d = await rolledOut("r");
    const rs = replicaSetsOf(d)[0] as Obj;
    const victim = String(metaOf(kit.podsOf(rs)[0] as Obj)["name"]);
    kit.api.delete(kit.registry.forStorageKey(STORAGE.pod)!, "default", victim, { dryRun: false });
    const pods = await kit.until("replacement", () => {
      const ps = kit.podsOf(rs);
      return (
        ps.length === 2 &&
        ps.every((p) => metaOf(p)["name"] !== victim && condition(p, "Ready")?.["status"] === "True") &&
        ps
      );
    });
    expect(pods).toHaveLength(2);
  });
});
