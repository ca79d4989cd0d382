import { ensureRevision, pruneRevisions, revisionsOf, templateOf } from "./controller-revisions.ts";
import { podFromTemplate } from "./replicaset-controller.ts";
import { clone, isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  countPods,
  isPodReady,
  isTerminating,
  nameOf,
  num,
  objList,
  specOf,
  STORAGE,
  statusOf,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// The StatefulSet controller: pods <name>-0 … <name>-(n-1), created in order (OrderedReady: each once the one
// before is Running and Ready; Parallel: all at once), removed from the highest ordinal, and rolled from the highest
// ordinal down to the partition one pod at a time, each replaced once all are Ready. Pods carry
// controller-revision-hash = the name of their template's ControllerRevision; status has currentRevision and
// updateRevision, which meet when the rollout completes. volumeClaimTemplates get their claims
// (<claim>-<name>-<ordinal>, left Pending: devkube binds no volume). Not emulated: maxUnavailable, PVC retention
// on scale-down or deletion (claims are kept, as the default Retain does).

const MANAGER = "kube-controller-manager";
const COMPONENT = "statefulset-controller";
const REVISION_LABEL = "controller-revision-hash";

const ordinalOf = (sts: Obj, pod: Obj): number => {
  const m = new RegExp(`^${nameOf(sts).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}-(\\d+)$`).exec(nameOf(pod));
  return m ? Number(m[1]) : -1;
};
const revisionOfPod = (pod: Obj): string => String((metaOf(pod)["labels"] as Obj | undefined)?.[REVISION_LABEL] ?? "");

export function syncStatefulSet(ctx: WorkloadContext, ns: string, name: string): void {
  const sts = ctx.get(STORAGE.statefulset, ns, name);
  if (!sts || isTerminating(sts)) return;
  const spec = specOf(sts);
  const replicas = num(spec["replicas"], 1);
  const parallel = spec["podManagementPolicy"] === "Parallel";
  const strategy = isObj(spec["updateStrategy"]) ? spec["updateStrategy"] : {};
  const rolling = strategy["type"] !== "OnDelete";
  const partition = rolling && isObj(strategy["rollingUpdate"]) ? num(strategy["rollingUpdate"]["partition"]) : 0;
  ctx.claim(STORAGE.pod, sts, "StatefulSet", (p) => ordinalOf(sts, p) >= 0);
  const update = ensureRevision(ctx, sts, "StatefulSet");
  const currentName = String(statusOf(sts)["currentRevision"] ?? update.name);
  const current = revisionsOf(ctx, sts).find((r) => nameOf(r) === currentName);

  const pods = () =>
    new Map(
      ctx
        .owned(STORAGE.pod, ns, uidOf(sts))
        .filter((p) => !isTerminating(p))
        .map((p) => [ordinalOf(sts, p), p] as const),
    );
  let byOrdinal = pods();
  const healthy = (p: Obj | undefined) => p !== undefined && statusOf(p)["phase"] === "Running" && isPodReady(p);

  // create the missing ones in order (ordinals below the partition at the current revision, as upstream)
  for (let i = 0; i < replicas; i++) {
    const pod = byOrdinal.get(i);
    if (!pod) {
      const atCurrent = rolling && i < partition && current !== undefined;
      createPod(ctx, sts, i, atCurrent ? templateOf(current) : undefined, atCurrent ? currentName : update.name);
      if (!parallel) break;
    } else if (!parallel && !healthy(pod)) break;
  }
  byOrdinal = pods();
  const all = [...byOrdinal.values()];
  const ready = (i: number) => healthy(byOrdinal.get(i));
  const allReady = all.every((p) => healthy(p));

  // scale down from the highest ordinal (OrderedReady: one at a time, once every other pod is Ready)
  const condemned = [...byOrdinal.keys()].filter((i) => i >= replicas || i < 0).sort((a, b) => b - a);
  if (condemned.length > 0) {
    for (const i of parallel ? condemned : condemned.slice(0, 1))
      if (parallel || allReady) deletePod(ctx, sts, byOrdinal.get(i) as Obj);
  } else if (rolling && allReady && byOrdinal.size === replicas) {
    // roll from the highest ordinal down to the partition: the first pod not at the update revision goes
    for (let i = replicas - 1; i >= partition; i--) {
      const pod = byOrdinal.get(i) as Obj;
      if (revisionOfPod(pod) !== update.name) {
        deletePod(ctx, sts, pod);
        break;
      }
      if (!ready(i)) break;
    }
  }

  byOrdinal = pods();
  const now = Date.now();
  const live = [...byOrdinal.values()];
  const counts = countPods(live, num(spec["minReadySeconds"]), now);
  if (counts.nextMs !== undefined) ctx.requeue("statefulset", ns, name, counts.nextMs);
  const updated = live.filter((p) => revisionOfPod(p) === update.name).length;
  let currentRevision = currentName;
  let currentReplicas = live.filter((p) => revisionOfPod(p) === currentName).length;
  if (rolling && updated === live.length && counts.ready === live.length && live.length === replicas) {
    currentRevision = update.name;
    currentReplicas = updated;
  }
  const status: Obj = {
    observedGeneration: metaOf(sts)["generation"],
    replicas: live.length,
    readyReplicas: counts.ready,
    currentReplicas,
    updatedReplicas: updated,
    currentRevision,
    updateRevision: update.name,
    collisionCount: 0,
    availableReplicas: counts.available,
  };
  // StatefulSetStatus: these counts are omitempty; replicas and availableReplicas are not
  for (const k of ["readyReplicas", "currentReplicas", "updatedReplicas"]) if (status[k] === 0) delete status[k];
  pruneRevisions(ctx, sts, new Set([currentRevision, update.name, ...live.map(revisionOfPod)]));
  if (jsonEqual(status, statusOf(sts))) return;
  const cur = ctx.get(STORAGE.statefulset, ns, name);
  if (!cur) return;
  cur["status"] = status;
  ctx.update(STORAGE.statefulset, cur, MANAGER, "status");
}

function deletePod(ctx: WorkloadContext, sts: Obj, pod: Obj): void {
  ctx.delete(STORAGE.pod, String(metaOf(sts)["namespace"]), nameOf(pod));
  ctx.event(sts, "SuccessfulDelete", `delete Pod ${nameOf(pod)} in StatefulSet ${nameOf(sts)} successful`, COMPONENT);
}

function createPod(ctx: WorkloadContext, sts: Obj, i: number, template: Obj | undefined, revision: string): void {
  const ns = String(metaOf(sts)["namespace"]);
  const podName = `${nameOf(sts)}-${i}`;
  const owner = template ? { ...sts, spec: { ...specOf(sts), template } } : sts;
  const pod = podFromTemplate(owner, "StatefulSet", podName, {
    [REVISION_LABEL]: revision,
    "statefulset.kubernetes.io/pod-name": podName,
    "apps.kubernetes.io/pod-index": String(i),
  });
  const podSpec = specOf(pod);
  podSpec["hostname"] = podName;
  if (specOf(sts)["serviceName"]) podSpec["subdomain"] = specOf(sts)["serviceName"];
  // each volumeClaimTemplate: a claim of this ordinal, and a volume of the pod referring to it
  const volumes = objList(podSpec["volumes"]);
  for (const claim of objList(specOf(sts)["volumeClaimTemplates"])) {
    const claimName = `${nameOf(claim)}-${nameOf(sts)}-${i}`;
    if (!ctx.store.get("/persistentvolumeclaims", ns, claimName)) {
      const body = clone(claim);
      metaOf(body)["name"] = claimName;
      metaOf(body)["labels"] = { ...(metaOf(body)["labels"] as Obj | undefined), ...(metaOf(pod)["labels"] as Obj) };
      delete body["status"];
      ctx.create("/persistentvolumeclaims", ns, body, MANAGER);
      ctx.event(
        sts,
        "SuccessfulCreate",
        `create Claim ${claimName} Pod ${podName} in StatefulSet ${nameOf(sts)} success`,
        COMPONENT,
      );
    }
    if (!volumes.some((v) => v["name"] === nameOf(claim)))
      volumes.push({ name: nameOf(claim), persistentVolumeClaim: { claimName } });
  }
  if (volumes.length > 0) podSpec["volumes"] = volumes;
  pod["spec"] = podSpec;
  ctx.create(STORAGE.pod, ns, pod, MANAGER);
  ctx.event(sts, "SuccessfulCreate", `create Pod ${podName} in StatefulSet ${nameOf(sts)} successful`, COMPONENT);
}
