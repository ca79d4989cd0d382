// Strategic-merge-patch metadata (the Go struct tags patchStrategy/patchMergeKey) for the built-in
// kinds devkube serves. Paths are field names from the root; list items are transparent.
// Lists not listed here are atomic (replaced), as for any Go field without a patch strategy.

export type ListStrategy = { merge: true; mergeKey?: string } | { merge: false };

type Table = Record<string, ListStrategy>;

const everyKind: Table = {
  "metadata.finalizers": { merge: true },
  "metadata.ownerReferences": { merge: true, mergeKey: "uid" },
};

function podSpec(prefix: string): Table {
  const p = prefix === "" ? "" : `${prefix}.`;
  return {
    [`${p}containers`]: { merge: true, mergeKey: "name" },
    [`${p}initContainers`]: { merge: true, mergeKey: "name" },
    [`${p}containers.env`]: { merge: true, mergeKey: "name" },
    [`${p}initContainers.env`]: { merge: true, mergeKey: "name" },
    [`${p}containers.ports`]: { merge: true, mergeKey: "containerPort" },
    [`${p}initContainers.ports`]: { merge: true, mergeKey: "containerPort" },
    [`${p}containers.volumeMounts`]: { merge: true, mergeKey: "mountPath" },
    [`${p}initContainers.volumeMounts`]: { merge: true, mergeKey: "mountPath" },
    [`${p}volumes`]: { merge: true, mergeKey: "name" },
    [`${p}imagePullSecrets`]: { merge: true, mergeKey: "name" },
    [`${p}tolerations`]: { merge: false },
  };
}

const conditionsByType: ListStrategy = { merge: true, mergeKey: "type" };

const kinds: Record<string, Table> = {
  "v1/ServiceAccount": { secrets: { merge: true, mergeKey: "name" } },
  "v1/Namespace": { "status.conditions": conditionsByType },
  "v1/Service": { "spec.ports": { merge: true, mergeKey: "port" }, "status.conditions": conditionsByType },
  "v1/PersistentVolumeClaim": { "status.conditions": conditionsByType },
  "v1/Pod": { ...podSpec("spec"), "status.conditions": conditionsByType },
  "apps/v1/Deployment": { ...podSpec("spec.template.spec"), "status.conditions": conditionsByType },
  "apps/v1/StatefulSet": { ...podSpec("spec.template.spec"), "status.conditions": conditionsByType },
  "policy/v1/PodDisruptionBudget": { "status.conditions": conditionsByType },
  "batch/v1/Job": { ...podSpec("spec.template.spec") },
};

/** The strategy for the list at `path` of objects of `kindKey` ("v1/Secret", "apps/v1/Deployment"). */
export function listStrategy(kindKey: string, path: string[]): ListStrategy {
  const key = path.join(".");
  return kinds[kindKey]?.[key] ?? everyKind[key] ?? { merge: false };
}
