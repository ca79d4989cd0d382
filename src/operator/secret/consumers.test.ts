import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../kube/types.ts";
import { createConsumerIndex } from "./consumer-index.ts";
import { podMayHoldOld, restartAnnotationOf, rolloutPending, secretsOfPodSpec } from "./consumers.ts";

// What counts as using a Secret, when a rollout is done (as kubectl rollout status judges), which pods may still hold
// the old credentials, and the index that answers "who uses this Secret" per namespace.

const deployment = (status: object, spec: object = {}, generation = 2): KubeObject => ({
  kind: "Deployment",
  metadata: { name: "web", namespace: "a", generation },
  spec: { replicas: 3, ...spec },
  status,
});

describe("secretsOfPodSpec", () => {
  it("finds env, envFrom, secret volumes and projected sources in every kind of container", () => {
    const spec = {
      initContainers: [{ env: [{ name: "X", valueFrom: { secretKeyRef: { name: "init", key: "k" } } }] }],
      containers: [
        { envFrom: [{ secretRef: { name: "from" } }, { configMapRef: { name: "cm" } }] },
        { env: [{ name: "P", value: "plain" }] },
      ],
      ephemeralContainers: [{ envFrom: [{ secretRef: { name: "debug" } }] }],
      volumes: [
        { name: "v", secret: { secretName: "vol" } },
        { name: "p", projected: { sources: [{ secret: { name: "proj" } }, { serviceAccountToken: { path: "t" } }] } },
      ],
    };
    expect([...secretsOfPodSpec(spec)].sort()).toEqual(["debug", "from", "init", "proj", "vol"]);
  });

  it("reads leniently: shapes it does not know are skipped, nothing throws", () => {
    expect(secretsOfPodSpec({ containers: "x", volumes: [null, 3, { secret: "x" }] }).size).toBe(0);
    expect(secretsOfPodSpec(undefined).size).toBe(0);
  });
});

describe("rolloutPending, as kubectl rollout status", () => {
  it("a Deployment: observedGeneration, updated, old and available replicas, progress deadline", () => {
    const done = { observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 3 };
    expect(rolloutPending(deployment(done))).toBeUndefined();
    expect(rolloutPending(deployment({ ...done, observedGeneration: 1 }))).toMatch(/not seen/);
    expect(rolloutPending(deployment({ ...done, updatedReplicas: 1 }))).toBe("1 of 3 replicas updated");
    expect(rolloutPending(deployment({ ...done, replicas: 4 }))).toBe("1 old replicas still running");
    expect(rolloutPending(deployment({ ...done, availableReplicas: 2 }))).toBe("2 of 3 available");
    const stuck = { ...done, conditions: [{ type: "Progressing", reason: "ProgressDeadlineExceeded" }] };
    expect(rolloutPending(deployment(stuck))).toMatch(/deadline/);
  });

  it("a StatefulSet: ready replicas, revisions, a partition", () => {
    const sts = (status: object, spec: object = {}) => ({ ...deployment(status, spec), kind: "StatefulSet" });
    const done = { observedGeneration: 2, readyReplicas: 3, currentRevision: "r2", updateRevision: "r2" };
    expect(rolloutPending(sts(done))).toBeUndefined();
    expect(rolloutPending(sts({ ...done, currentRevision: "r1" }))).toMatch(/revision/);
    expect(rolloutPending(sts({ ...done, readyReplicas: 2 }))).toBe("2 of 3 replicas ready");
    const partitioned = { updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 2 } } };
    expect(rolloutPending(sts({ ...done, currentRevision: "r1", updatedReplicas: 1 }, partitioned))).toBeUndefined();
  });

  it("a DaemonSet: updated and available pods of those desired", () => {
    const ds = (status: object) => ({ ...deployment(status), kind: "DaemonSet" });
    const done = { observedGeneration: 2, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2 };
    expect(rolloutPending(ds(done))).toBeUndefined();
    expect(rolloutPending(ds({ ...done, updatedNumberScheduled: 1 }))).toBe("1 of 2 pods updated");
  });
});

describe("podMayHoldOld", () => {
  const write = Date.parse("2030-01-01T00:00:10.500Z");
  const pod = (created: string, phase = "Running", annotations?: Record<string, string>): KubeObject => ({
    kind: "Pod",
    metadata: { name: "p", creationTimestamp: created, ...(annotations ? { annotations } : {}) },
    status: { phase },
  });
  it("a running pod created up to the write's second may hold the old credentials; one created later does not", () => {
    expect(podMayHoldOld(pod("2030-01-01T00:00:09Z"), write)).toBe(true);
    expect(podMayHoldOld(pod("2030-01-01T00:00:10Z"), write)).toBe(true);
    expect(podMayHoldOld(pod("2030-01-01T00:00:11Z"), write)).toBe(false);
    expect(podMayHoldOld(pod("2030-01-01T00:00:09Z", "Succeeded"), write)).toBe(false);
  });
  it("the restart annotation decides when a pod carries it", () => {
    const key = restartAnnotationOf("db");
    expect(podMayHoldOld(pod("2030-01-01T00:00:11Z", "Running", { [key]: "old" }), write, { key, hash: "new" })).toBe(
      true,
    );
    expect(podMayHoldOld(pod("2030-01-01T00:00:01Z", "Running", { [key]: "new" }), write, { key, hash: "new" })).toBe(
      false,
    );
  });
});

describe("restartAnnotationOf", () => {
  it("names the Secret, or a hash of a name too long for an annotation name", () => {
    expect(restartAnnotationOf("orders-db")).toBe("rotation.mds.dev/orders-db");
    const long = restartAnnotationOf("x".repeat(200));
    expect(long.split("/")[1]).toHaveLength(63);
  });
});

describe("the consumer index", () => {
  const pod = (ns: string, name: string, secret: string): KubeObject => ({
    kind: "Pod",
    metadata: { name, namespace: ns },
    spec: { containers: [{ envFrom: [{ secretRef: { name: secret } }] }] },
  });
  it("answers per namespace: a Secret's consumers are never another namespace's", () => {
    const index = createConsumerIndex();
    index.update("Pod", pod("a", "p1", "db"), false);
    index.update("Pod", pod("b", "p2", "db"), false);
    expect(index.of("a", "db").pods.map((p) => p.metadata.name)).toEqual(["p1"]);
    expect(index.of("b", "db").pods.map((p) => p.metadata.name)).toEqual(["p2"]);
    expect(index.of("c", "db")).toEqual({ workloads: [], pods: [] });
  });
  it("follows a changed reference and forgets deleted objects (no empty entries left)", () => {
    const index = createConsumerIndex();
    expect(index.update("Pod", pod("a", "p1", "db"), false)).toEqual(["a/db"]);
    expect(index.update("Pod", pod("a", "p1", "other"), false).sort()).toEqual(["a/db", "a/other"]);
    expect(index.of("a", "db").pods).toEqual([]);
    index.update("Pod", pod("a", "p1", "other"), true);
    expect(index.of("a", "other").pods).toEqual([]);
  });
  it("keeps only what a rotation reads of an object", () => {
    const index = createConsumerIndex();
    const p = pod("a", "p1", "db");
    p.metadata.annotations = { "rotation.mds.dev/db": "h", "kubectl.kubernetes.io/last-applied-configuration": "{}" };
    index.update("Pod", p, false);
    const kept = index.of("a", "db").pods[0]!;
    expect(kept.metadata.annotations).toEqual({ "rotation.mds.dev/db": "h" });
    expect(kept["spec"]).toBeUndefined();
  });
});
