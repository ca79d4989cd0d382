import { ensureRevision, pruneRevisions } from "./controller-revisions.ts";
import { podFromTemplate } from "./replicaset-controller.ts";
import { isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  condition,
  isTerminating,
  nameOf,
  NODES,
  num,
  podAvailability,
  scaled,
  specOf,
  STORAGE,
  statusOf,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// The DaemonSet controller: one pod per Ready Node whose labels match the template's nodeSelector (devkube has one
// Node unless told otherwise), bound to it directly through spec.nodeName (upstream sets a node affinity and lets
// the scheduler bind). RollingUpdate replaces old pods within maxUnavailable (maxSurge is not emulated);
// OnDelete replaces only deleted ones. Pods carry controller-revision-hash and pod-template-generation.

const MANAGER = "kube-controller-manager";
const COMPONENT = "daemonset-controller";

function deletePod(ctx: WorkloadContext, ds: Obj, pod: Obj): void {
  ctx.delete(STORAGE.pod, String(metaOf(ds)["namespace"]), nameOf(pod));
  ctx.event(ds, "SuccessfulDelete", `Deleted pod: ${nameOf(pod)}`, COMPONENT);
}

export function syncDaemonSet(ctx: WorkloadContext, ns: string, name: string): void {
  const ds = ctx.get(STORAGE.daemonset, ns, name);
  if (!ds || isTerminating(ds)) return;
  const spec = specOf(ds);
  const template = isObj(spec["template"]) ? (spec["template"] as Obj) : {};
  const selector = isObj(specOf(template)["nodeSelector"]) ? (specOf(template)["nodeSelector"] as Obj) : {};
  const nodes = ctx.store
    .sorted(NODES)
    .map(([, n]) => n)
    .filter(
      (n) =>
        condition(n, "Ready")?.["status"] === "True" &&
        Object.entries(selector).every(([k, v]) => (metaOf(n)["labels"] as Obj | undefined)?.[k] === v),
    )
    .map(nameOf);
  ctx.claim(STORAGE.pod, ds, "DaemonSet");
  const revision = ensureRevision(ctx, ds, "DaemonSet");
  const isCurrent = (p: Obj) =>
    (metaOf(p)["labels"] as Obj | undefined)?.["controller-revision-hash"] === revision.hash;
  const podsByNode = () => {
    const map = new Map<string, Obj[]>();
    for (const p of ctx.owned(STORAGE.pod, ns, uidOf(ds)).filter((x) => !isTerminating(x))) {
      const node = String(specOf(p)["nodeName"] ?? "");
      map.set(node, [...(map.get(node) ?? []), p]);
    }
    return map;
  };
  let byNode = podsByNode();
  const minReady = num(spec["minReadySeconds"]);
  const now = Date.now();

  for (const [node, pods] of byNode) {
    // a node no longer eligible loses its pod; an eligible one keeps one (the current one if any)
    const extra = nodes.includes(node)
      ? [...pods].sort((a, b) => Number(isCurrent(b)) - Number(isCurrent(a))).slice(1)
      : pods;
    for (const p of extra) deletePod(ctx, ds, p);
  }
  for (const node of nodes) {
    if (byNode.has(node)) continue;
    const pod = podFromTemplate(ds, "DaemonSet", undefined, {
      "controller-revision-hash": revision.hash,
      "pod-template-generation": String(metaOf(ds)["generation"] ?? 1),
    });
    (pod["spec"] as Obj)["nodeName"] = node;
    const created = ctx.create(STORAGE.pod, ns, pod, MANAGER);
    ctx.event(ds, "SuccessfulCreate", `Created pod: ${nameOf(created)}`, COMPONENT);
  }

  byNode = podsByNode();
  const strategy = isObj(spec["updateStrategy"]) ? spec["updateStrategy"] : {};
  if (strategy["type"] !== "OnDelete") {
    const ru = isObj(strategy["rollingUpdate"]) ? strategy["rollingUpdate"] : {};
    const maxUnavailable = Math.max(1, scaled(ru["maxUnavailable"] ?? 1, nodes.length, true));
    const available = (p: Obj | undefined) => p !== undefined && podAvailability(p, minReady, now) === true;
    let unavailable = nodes.filter((n) => !available(byNode.get(n)?.[0])).length;
    const old = nodes.map((n) => byNode.get(n)?.[0]).filter((p): p is Obj => p !== undefined && !isCurrent(p));
    // old pods that are not available go first: replacing them costs no availability
    for (const p of old.filter((x) => !available(x))) deletePod(ctx, ds, p);
    for (const p of old.filter((x) => available(x))) {
      if (unavailable >= maxUnavailable) break;
      deletePod(ctx, ds, p);
      unavailable++;
    }
  }

  byNode = podsByNode();
  const scheduled = nodes.filter((n) => byNode.has(n));
  const onNodes = scheduled.map((n) => byNode.get(n)?.[0] as Obj);
  let numberAvailable = 0;
  let nextMs: number | undefined;
  for (const p of onNodes) {
    const a = podAvailability(p, minReady, now);
    if (a === true) numberAvailable++;
    else if (typeof a === "number") nextMs = Math.min(nextMs ?? a, a);
  }
  if (nextMs !== undefined) ctx.requeue("daemonset", ns, name, nextMs);
  const status: Obj = {
    currentNumberScheduled: scheduled.length,
    numberMisscheduled: [...byNode.keys()].filter((n) => !nodes.includes(n)).length,
    desiredNumberScheduled: nodes.length,
    numberReady: onNodes.filter((p) => condition(p, "Ready")?.["status"] === "True").length,
    observedGeneration: metaOf(ds)["generation"],
    updatedNumberScheduled: onNodes.filter(isCurrent).length,
    numberAvailable,
    numberUnavailable: nodes.length - numberAvailable,
  };
  // DaemonSetStatus: these are omitempty
  for (const k of ["updatedNumberScheduled", "numberAvailable", "numberUnavailable"])
    if (status[k] === 0) delete status[k];
  pruneRevisions(ctx, ds, new Set([revision.name]));
  if (jsonEqual(status, statusOf(ds))) return;
  const cur = ctx.get(STORAGE.daemonset, ns, name);
  if (!cur) return;
  cur["status"] = status;
  ctx.update(STORAGE.daemonset, cur, MANAGER, "status");
}
