import { afterEach, describe, expect, it } from "vitest";
import { isObj, metaOf, type Obj } from "./types.ts";
import { condition, controllerOf, uidOf } from "./workload-context.ts";
import { startKit, type Kit } from "./workload-test-kit.ts";

// The StatefulSet, DaemonSet and Job controllers with devkube's kubelet, in process.

let kit: Kit;
afterEach(() => kit?.close());

const template = (app: string, extra: Obj = {}): Obj => ({
  metadata: { labels: { app }, ...extra },
  spec: { containers: [{ name: "app", image: "example/app:1" }] },
});
const status = (o: Obj | undefined): Obj => (o && isObj(o["status"]) ? o["status"] : {});
const labels = (o: Obj): Obj => (metaOf(o)["labels"] as Obj | undefined) ?? {};
const names = (pods: Obj[]): string[] => pods.map((p) => String(metaOf(p)["name"])).sort();

/** What `kubectl rollout status statefulset/x` waits for. */
function stsRolledOut(name: string) {
  return kit.until(`statefulset ${name} rolled out`, () => {
    const s = kit.get("statefulsets", name);
    if (!s) return false;
    const st = status(s);
    const want = Number((s["spec"] as Obj)["replicas"]);
    const done =
      Number(st["observedGeneration"] ?? 0) >= Number(metaOf(s)["generation"]) &&
      Number(st["readyReplicas"] ?? 0) >= want &&
      Number(st["updatedReplicas"] ?? 0) >= want &&
      st["currentRevision"] === st["updateRevision"];
    return done && s;
  });
}

describe("StatefulSet", () => {
  it("creates <name>-0..n-1 in order, each once the previous is Ready, with revision labels and claims", async () => {
    kit = startKit();
    const order: string[] = [];
    const notReadyBefore: string[] = [];
    const off = kit.everyEvent((sk, ev) => {
      if (sk !== "/pods" || ev.type !== "ADDED") return;
      // every pod present when a new one is created is Running and Ready (OrderedReady)
      for (const p of kit.list("pods"))
        if (metaOf(p)["name"] !== metaOf(ev.object)["name"] && condition(p, "Ready")?.["status"] !== "True")
          notReadyBefore.push(String(metaOf(p)["name"]));
      order.push(String(metaOf(ev.object)["name"]));
    });
    kit.apply("statefulsets", {
      metadata: { name: "db" },
      spec: {
        replicas: 3,
        serviceName: "db",
        selector: { matchLabels: { app: "db" } },
        template: template("db"),
        volumeClaimTemplates: [
          {
            metadata: { name: "data" },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
          },
        ],
      },
    });
    const sts = await stsRolledOut("db");
    off();
    expect(order).toEqual(["db-0", "db-1", "db-2"]);
    expect(notReadyBefore).toEqual([]);
    const st = status(sts);
    expect(st).toMatchObject({
      replicas: 3,
      readyReplicas: 3,
      currentReplicas: 3,
      updatedReplicas: 3,
      availableReplicas: 3,
    });
    expect(st["updateRevision"]).toMatch(/^db-[bcdfghjklmnpqrstvwxz2456789]+$/);
    for (const p of kit.list("pods")) {
      expect(labels(p)).toMatchObject({
        app: "db",
        "controller-revision-hash": st["updateRevision"],
        "statefulset.kubernetes.io/pod-name": metaOf(p)["name"],
      });
      expect(p["spec"]).toMatchObject({ hostname: metaOf(p)["name"], subdomain: "db" });
      expect(controllerOf(p)).toMatchObject({ kind: "StatefulSet", name: "db" });
    }
    expect(names(kit.list("persistentvolumeclaims"))).toEqual(["data-db-0", "data-db-1", "data-db-2"]);
    const revisions = kit.list("controllerrevisions");
    expect(revisions.map((r) => [metaOf(r)["name"], r["revision"]])).toEqual([[st["updateRevision"], 1]]);
  });

  it("rolls from the highest ordinal down, one pod at a time, and moves currentRevision when done", async () => {
    kit = startKit();
    kit.apply("statefulsets", {
      metadata: { name: "web" },
      spec: { replicas: 3, selector: { matchLabels: { app: "web" } }, template: template("web") },
    });
    const first = await stsRolledOut("web");
    const oldRevision = status(first)["currentRevision"];
    const deleted: string[] = [];
    const off = kit.everyEvent((sk, ev) => {
      if (sk === "/pods" && ev.type === "DELETED") deleted.push(String(metaOf(ev.object)["name"]));
    });
    kit.patch("statefulsets", "web", { spec: { template: { metadata: { annotations: { restartedAt: "now" } } } } });
    const sts = await stsRolledOut("web");
    off();
    expect(deleted).toEqual(["web-2", "web-1", "web-0"]);
    expect(status(sts)["currentRevision"]).not.toBe(oldRevision);
    expect(
      kit
        .list("controllerrevisions")
        .map((r) => r["revision"])
        .sort(),
    ).toEqual([1, 2]);
  });

  it("a partition keeps the ordinals below it at the current revision", async () => {
    kit = startKit();
    kit.apply("statefulsets", {
      metadata: { name: "part" },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: "part" } },
        template: template("part"),
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } },
      },
    });
    const first = await stsRolledOut("part");
    const old = status(first)["currentRevision"];
    kit.patch("statefulsets", "part", { spec: { template: { metadata: { annotations: { v: "2" } } } } });
    const sts = await kit.until("partitioned rollout", () => {
      const s = kit.get("statefulsets", "part") as Obj;
      return status(s)["updatedReplicas"] === 1 && status(s)["readyReplicas"] === 3 && s;
    });
    const byName = new Map(kit.list("pods").map((p) => [metaOf(p)["name"], labels(p)["controller-revision-hash"]]));
    expect(byName.get("part-2")).toBe(status(sts)["updateRevision"]);
    expect(byName.get("part-0")).toBe(old);
    expect(byName.get("part-1")).toBe(old);
    expect(status(sts)["currentRevision"]).toBe(old);
  });

  it("scales down from the highest ordinal", async () => {
    kit = startKit();
    kit.apply("statefulsets", {
      metadata: { name: "s" },
      spec: { replicas: 3, selector: { matchLabels: { app: "s" } }, template: template("s") },
    });
    await stsRolledOut("s");
    kit.patch("statefulsets", "s", { spec: { replicas: 1 } });
    await kit.until(
      "one pod",
      () => kit.list("pods").length === 1 && status(kit.get("statefulsets", "s"))["replicas"] === 1,
    );
    expect(names(kit.list("pods"))).toEqual(["s-0"]);
  });
});

describe("DaemonSet", () => {
  it("runs one pod per Node, bound to it, and rolls them within maxUnavailable", async () => {
    kit = startKit({ nodes: ["n1", "n2", "n3"] });
    kit.apply("daemonsets", {
      metadata: { name: "agent" },
      spec: { selector: { matchLabels: { app: "agent" } }, template: template("agent") },
    });
    const rolled = () =>
      kit.until("daemonset rolled out", () => {
        const d = kit.get("daemonsets", "agent") as Obj;
        const s = status(d);
        return (
          s["observedGeneration"] === metaOf(d)["generation"] &&
          s["desiredNumberScheduled"] === 3 &&
          s["updatedNumberScheduled"] === 3 &&
          s["numberAvailable"] === 3 &&
          d
        );
      });
    const ds = await rolled();
    expect(status(ds)).toMatchObject({ currentNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3 });
    expect(
      kit
        .list("pods")
        .map((p) => (p["spec"] as Obj)["nodeName"])
        .sort(),
    ).toEqual(["n1", "n2", "n3"]);
    let minAvailable = 3;
    const off = kit.everyEvent(() => {
      const ready = kit.list("pods").filter((p) => condition(p, "Ready")?.["status"] === "True").length;
      minAvailable = Math.min(minAvailable, ready);
    });
    kit.patch("daemonsets", "agent", { spec: { template: { metadata: { annotations: { v: "2" } } } } });
    await rolled();
    off();
    expect(minAvailable).toBe(2);
    for (const p of kit.list("pods")) expect(labels(p)["pod-template-generation"]).toBe("2");
  });
});

describe("DaemonSet validation", () => {
  it("refuses bounds that are not ints or percentages, or both zero; defaults each", () => {
    kit = startKit();
    const ds = (rollingUpdate: Obj) => ({
      metadata: { name: "v" },
      spec: {
        selector: { matchLabels: { app: "v" } },
        template: template("v"),
        updateStrategy: { type: "RollingUpdate", rollingUpdate },
      },
    });
    expect(() => kit.apply("daemonsets", ds({ maxUnavailable: "some" }))).toThrow(
      /spec\.updateStrategy\.rollingUpdate\.maxUnavailable: Invalid value: "some": a valid percent string/,
    );
    expect(() => kit.apply("daemonsets", ds({ maxUnavailable: 0 }))).toThrow(/may not be 0 when `maxSurge` is 0/);
    const made = kit.apply("daemonsets", ds({ maxSurge: 1 }));
    expect((made["spec"] as Obj)["updateStrategy"]).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxSurge: 1, maxUnavailable: 1 },
    });
  });
});

describe("Job", () => {
  it("runs its pods (<job>-<5 chars>, labelled and owned) and completes once they are reported Succeeded", async () => {
    kit = startKit();
    kit.apply("cronjobs", {
      metadata: { name: "nightly" },
      spec: { schedule: "0 3 * * *", jobTemplate: { spec: { template: template("n", {}) } } },
    });
    const cron = kit.get("cronjobs", "nightly") as Obj;
    const job = kit.apply("jobs", {
      metadata: {
        name: "nightly-manual",
        ownerReferences: [
          { apiVersion: "batch/v1", kind: "CronJob", name: "nightly", uid: uidOf(cron), controller: true },
        ],
      },
      spec: {
        template: { ...template("n"), spec: { containers: [{ name: "app", image: "x" }], restartPolicy: "Never" } },
      },
    });
    expect((job["spec"] as Obj)["selector"]).toEqual({
      matchLabels: { "batch.kubernetes.io/controller-uid": uidOf(job) },
    });
    const pod = await kit.until("running job pod", () => {
      const p = kit.list("pods")[0];
      return p && status(p)["phase"] === "Running" && p;
    });
    expect(metaOf(pod)["name"]).toMatch(/^nightly-manual-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    expect(labels(pod)).toMatchObject({
      "job-name": "nightly-manual",
      "batch.kubernetes.io/controller-uid": uidOf(job),
    });
    expect(controllerOf(pod)).toMatchObject({ apiVersion: "batch/v1", kind: "Job", name: "nightly-manual" });
    await kit.until("job active", () => status(kit.get("jobs", "nightly-manual"))["active"] === 1);
    kit.patch("pods", String(metaOf(pod)["name"]), { status: { phase: "Succeeded" } }, "default", "status");
    const done = await kit.until("job complete", () => {
      const j = kit.get("jobs", "nightly-manual") as Obj;
      return condition(j, "Complete")?.["status"] === "True" && j;
    });
    expect(status(done)).toMatchObject({ succeeded: 1 });
    expect(status(done)["active"]).toBeUndefined();
  });
});
