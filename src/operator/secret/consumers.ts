import { createHash } from "node:crypto";
import type { KubeObject, ResourceType } from "../../kube/types.ts";

// The consumers of a connection Secret: the workloads of its namespace whose pod template uses it, and the pods
// that do. What "uses" means, whether a workload finished rolling, whether a pod started before the Secret changed,
// and the pod-template annotation a Restart applies. No Kubernetes call here: the index (consumer-index.ts) feeds it.

export const DeploymentType: ResourceType = {
  group: "apps",
  version: "v1",
  plural: "deployments",
  kind: "Deployment",
  namespaced: true,
};
const StatefulSetType: ResourceType = { ...DeploymentType, plural: "statefulsets", kind: "StatefulSet" };
const DaemonSetType: ResourceType = { ...DeploymentType, plural: "daemonsets", kind: "DaemonSet" };
export const PodType: ResourceType = { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true };
/** The kinds a Restart rolls: those whose pod template Kubernetes rolls out on a change. */
export const workloadTypes = [DeploymentType, StatefulSetType, DaemonSetType];

/** The field manager of the restart annotation: its own, so GitOps tools can tell it from what they apply. */
export const restartFieldManager = "mds-operator-rotation";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number => (typeof v === "number" ? v : 0);

/**
 * The Secret names a pod spec uses: env secretKeyRef, envFrom secretRef, secret volumes, projected volumes' secret
 * sources, in every kind of container. Read leniently: a field of a shape it does not know is skipped.
 */
export function secretsOfPodSpec(spec: unknown): Set<string> {
  const names = new Set<string>();
  if (!isObj(spec)) return names;
  const add = (v: unknown) => {
    const name = str(v);
    if (name !== undefined && name !== "") names.add(name);
  };
  for (const c of [
    ...list(spec["containers"]),
    ...list(spec["initContainers"]),
    ...list(spec["ephemeralContainers"]),
  ]) {
    for (const e of list(c["env"])) {
      const from = e["valueFrom"];
      if (isObj(from) && isObj(from["secretKeyRef"])) add(from["secretKeyRef"]["name"]);
    }
    for (const e of list(c["envFrom"])) if (isObj(e["secretRef"])) add(e["secretRef"]["name"]);
  }
  for (const v of list(spec["volumes"])) {
    if (isObj(v["secret"])) add(v["secret"]["secretName"]);
    const projected = v["projected"];
    if (isObj(projected)) for (const s of list(projected["sources"])) if (isObj(s["secret"])) add(s["secret"]["name"]);
  }
  return names;
}

/** The pod spec of a pod, or of a workload's pod template. */
export function podSpecOf(obj: KubeObject): unknown {
  const spec = obj["spec"];
  if (!isObj(spec)) return undefined;
  return obj.kind === "Pod" ? spec : isObj(spec["template"]) ? spec["template"]["spec"] : undefined;
}

/**
 * The pod-template annotation a Restart sets: one per Secret, so a workload using two Secrets keeps both. The key's
 * name part is the Secret's name when it fits an annotation name (63 characters), else a hash of it.
 */
export function restartAnnotationOf(secretName: string): string {
  const part =
    secretName.length <= 63 ? secretName : createHash("sha256").update(secretName).digest("hex").slice(0, 63);
  return `rotation.mds.dev/${part}`;
}

/** The server-side apply body that sets only the restart annotation (with its own field manager). */
export function restartApplyBody(workload: KubeObject, annotations: Record<string, string>): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: workload.kind,
    metadata: { name: workload.metadata.name, namespace: workload.metadata.namespace },
    spec: { template: { metadata: { annotations } } },
  };
}

/** The annotations of a workload's pod template. */
export function templateAnnotationsOf(workload: KubeObject): Record<string, string> {
  const spec = workload["spec"];
  const template = isObj(spec) ? spec["template"] : undefined;
  const meta = isObj(template) ? template["metadata"] : undefined;
  const annotations = isObj(meta) ? meta["annotations"] : undefined;
  if (!isObj(annotations)) return {};
  return Object.fromEntries(Object.entries(annotations).filter((e): e is [string, string] => typeof e[1] === "string"));
}

/**
 * Why a workload has not finished rolling out, as `kubectl rollout status` judges it; undefined when it has.
 * A rollout the controller has not seen yet (observedGeneration behind) is not finished.
 */
export function rolloutPending(workload: KubeObject): string | undefined {
  const spec = isObj(workload["spec"]) ? workload["spec"] : {};
  const status = isObj(workload["status"]) ? workload["status"] : {};
  const generation = workload.metadata.generation ?? 0;
  if (num(status["observedGeneration"]) < generation) return "the controller has not seen its new template yet";
  if (workload.kind === "Deployment") {
    const want = typeof spec["replicas"] === "number" ? spec["replicas"] : 1;
    const progressing = list(status["conditions"]).find((c) => c["type"] === "Progressing");
    if (progressing?.["reason"] === "ProgressDeadlineExceeded") return "its progress deadline was exceeded";
    const updated = num(status["updatedReplicas"]);
    if (updated < want) return `${updated} of ${want} replicas updated`;
    if (num(status["replicas"]) > updated) return `${num(status["replicas"]) - updated} old replicas still running`;
    if (num(status["availableReplicas"]) < updated)
      return `${num(status["availableReplicas"])} of ${updated} available`;
    return undefined;
  }
  if (workload.kind === "StatefulSet") {
    const want = typeof spec["replicas"] === "number" ? spec["replicas"] : 1;
    if (num(status["readyReplicas"]) < want) return `${num(status["readyReplicas"])} of ${want} replicas ready`;
    const strategy = isObj(spec["updateStrategy"]) ? spec["updateStrategy"] : {};
    // OnDelete: nothing rolls by itself; the pods say whether the old ones are gone.
    if (strategy["type"] === "OnDelete") return undefined;
    const rolling = isObj(strategy["rollingUpdate"]) ? strategy["rollingUpdate"] : {};
    const partition = num(rolling["partition"]);
    if (partition > 0) {
      const updated = num(status["updatedReplicas"]);
      return updated < want - partition ? `${updated} of ${want - partition} replicas updated` : undefined;
    }
    if (status["updateRevision"] !== status["currentRevision"]) return "its update revision is not current yet";
    return undefined;
  }
  if (workload.kind === "DaemonSet") {
    const want = num(status["desiredNumberScheduled"]);
    const updated = num(status["updatedNumberScheduled"]);
    if (updated < want) return `${updated} of ${want} pods updated`;
    if (num(status["numberAvailable"]) < want) return `${num(status["numberAvailable"])} of ${want} available`;
    return undefined;
  }
  return undefined;
}

/**
 * Whether a pod may still hold the credentials the Secret had before `writtenAt` (ms): one that is not over and
 * either carries the restart annotation with another data hash, or was created before the write. creationTimestamp
 * has whole seconds: a pod created in the second of the write may have started before it, so it counts as old (a
 * revocation waits rather than cut a login an app still uses).
 */
export function podMayHoldOld(pod: KubeObject, writtenAt: number, restart?: { key: string; hash: string }): boolean {
  const status = isObj(pod["status"]) ? pod["status"] : {};
  const phase = str(status["phase"]);
  if (phase === "Succeeded" || phase === "Failed") return false;
  const stamped = restart === undefined ? undefined : pod.metadata.annotations?.[restart.key];
  if (stamped !== undefined) return stamped !== restart?.hash;
  const created = Date.parse(pod.metadata.creationTimestamp ?? "");
  if (Number.isNaN(created)) return true;
  return created <= Math.floor(writtenAt / 1000) * 1000;
}
