import { clone, isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  condition,
  controllerRef,
  countPods,
  isPodReady,
  isTerminating,
  nameOf,
  num,
  specOf,
  STORAGE,
  statusOf,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// The ReplicaSet controller: as many pods as spec.replicas, named <rs>-<5 chars>, and the status counts that the
// Deployment controller and kubectl read. Pods are created and deleted through the API as kube-controller-manager
// does; which pod goes first on a scale-down follows upstream's ranking (unscheduled, pending, not ready, newest).

const MANAGER = "kube-controller-manager";
const COMPONENT = "replicaset-controller";

export function syncReplicaSet(ctx: WorkloadContext, ns: string, name: string): void {
  const rs = ctx.get(STORAGE.replicaset, ns, name);
  if (!rs || isTerminating(rs)) return;
  const spec = specOf(rs);
  const uid = uidOf(rs);
  ctx.claim(STORAGE.pod, rs, "ReplicaSet");
  const live = () => ctx.owned(STORAGE.pod, ns, uid).filter((p) => !isTerminating(p));
  const pods = live();
  const desired = num(spec["replicas"], 1);
  if (pods.length < desired) {
    for (let i = pods.length; i < desired; i++) {
      const pod = ctx.create(STORAGE.pod, ns, podFromTemplate(rs, "ReplicaSet"), MANAGER);
      ctx.event(rs, "SuccessfulCreate", `Created pod: ${nameOf(pod)}`, COMPONENT);
    }
  } else if (pods.length > desired) {
    for (const p of rankForDeletion(pods).slice(0, pods.length - desired)) {
      ctx.delete(STORAGE.pod, ns, nameOf(p));
      ctx.event(rs, "SuccessfulDelete", `Deleted pod: ${nameOf(p)}`, COMPONENT);
    }
  }
  const now = Date.now();
  const after = live();
  const minReady = num(spec["minReadySeconds"]);
  const counts = countPods(after, minReady, now);
  const labels =
    isObj(spec["template"]) && isObj(metaOf(spec["template"])["labels"]) ? metaOf(spec["template"])["labels"] : {};
  const status: Obj = {
    replicas: after.length,
    fullyLabeledReplicas: after.filter((p) =>
      Object.entries(labels as Obj).every(([k, v]) => (metaOf(p)["labels"] as Obj | undefined)?.[k] === v),
    ).length,
    readyReplicas: counts.ready,
    availableReplicas: counts.available,
    observedGeneration: metaOf(rs)["generation"],
  };
  for (const k of ["readyReplicas", "availableReplicas", "fullyLabeledReplicas"]) if (status[k] === 0) delete status[k];
  if (counts.nextMs !== undefined) ctx.requeue("replicaset", ns, name, counts.nextMs);
  if (jsonEqual(status, statusOf(rs))) return;
  rs["status"] = status;
  ctx.update(STORAGE.replicaset, rs, MANAGER, "status");
}

/** A pod of a controller's template: its labels and annotations, its spec, a controller reference. */
export function podFromTemplate(owner: Obj, kind: string, name?: string, extraLabels: Obj = {}): Obj {
  const template = isObj(specOf(owner)["template"]) ? (specOf(owner)["template"] as Obj) : {};
  const tmeta = isObj(template["metadata"]) ? template["metadata"] : {};
  const meta: Obj = {
    ...(name ? { name } : { generateName: `${nameOf(owner)}-` }),
    labels: { ...(isObj(tmeta["labels"]) ? tmeta["labels"] : {}), ...extraLabels },
    ownerReferences: [controllerRef(owner, kind === "Job" ? "batch/v1" : "apps/v1", kind)],
  };
  if (isObj(tmeta["annotations"])) meta["annotations"] = clone(tmeta["annotations"]);
  if (isObj(tmeta["finalizers"])) meta["finalizers"] = clone(tmeta["finalizers"]);
  return { metadata: meta, spec: clone(specOf(template)) };
}

const PHASE_RANK: Record<string, number> = { Pending: 0, Unknown: 1, Running: 2 };

/** Upstream's ActivePods order, the first to delete first: unscheduled, pending, not ready, ready the shortest, newest. */
function rankForDeletion(pods: Obj[]): Obj[] {
  const key = (p: Obj): Array<number | string> => {
    const readySince = condition(p, "Ready")?.["lastTransitionTime"];
    return [
      specOf(p)["nodeName"] ? 1 : 0,
      PHASE_RANK[String(statusOf(p)["phase"] ?? "Pending")] ?? 0,
      isPodReady(p) ? 1 : 0,
      isPodReady(p) ? -Date.parse(String(readySince ?? 0)) : 0,
      -Date.parse(String(metaOf(p)["creationTimestamp"] ?? 0)),
    ];
  };
  return [...pods].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return (ka[i] as number) - (kb[i] as number);
    return nameOf(b).localeCompare(nameOf(a));
  });
}
