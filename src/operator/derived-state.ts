import type { KubeObject } from "../kube/types.ts";
import type { Controller, ObjectCache } from "./controller.ts";
import type { OperatorMetrics, StateSource } from "./metrics.ts";
import { resourceStateOf, summarizeStates, type ResourceState } from "./resource-state.ts";
import { splitKey } from "./status.ts";
import type { WorkQueue } from "./work-queue.ts";
import { controllerName } from "./controller-runtime-metrics.ts";

// What the operator keeps from the informers' events so that a scrape, or the deletion-protection audit, unpacks no
// cached object (resource-state.ts): each kind's objects' states, the views of the kinds' per-object gauges, the
// objects with spec.deletionProtection, and when each object first became Ready (the time-to-ready histogram).

export function createDerivedState(controllers: readonly Controller[], metrics: OperatorMetrics) {
  const states = new Map(controllers.map((k) => [k.kind, new Map<string, ResourceState>()]));
  const gaugeViews = controllers.flatMap((c) =>
    c.objectGauges === undefined ? [] : [{ gauges: c.objectGauges, views: new Map<string, unknown>() }],
  );
  // The objects with spec.deletionProtection ("Kind|namespace/name"): few, and found without a scan.
  const deletionProtected = new Set<string>();
  const readyAt = new Map<string, number>(); // uid → when first seen Ready

  function noteReady(kind: string, obj: KubeObject) {
    const conds = (obj["status"] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
    const uid = obj.metadata.uid;
    if (uid === undefined || readyAt.has(uid)) return;
    if (conds?.some((c) => c.type === "Ready" && c.status === "True") && obj.metadata.creationTimestamp) {
      readyAt.set(uid, Date.now());
      metrics.timeToReady.observe(
        { kind },
        Math.max(0, (Date.now() - Date.parse(obj.metadata.creationTimestamp)) / 1000),
      );
    }
  }

  return {
    update(kind: string, key: string, obj: KubeObject, deleted: boolean): void {
      if (deleted) states.get(kind)?.delete(key);
      else states.get(kind)?.set(key, resourceStateOf(obj));
      const protectedNow =
        !deleted && (obj["spec"] as { deletionProtection?: unknown } | undefined)?.deletionProtection;
      if (protectedNow === true) deletionProtected.add(`${kind}|${key}`);
      else deletionProtected.delete(`${kind}|${key}`);
      for (const { gauges, views } of gaugeViews) {
        if (gauges.of !== kind) continue;
        const view = deleted ? undefined : gauges.view(obj);
        if (view === undefined) views.delete(key);
        else views.set(key, view);
      }
      if (!deleted) noteReady(kind, obj);
      else if (obj.metadata.uid !== undefined) readyAt.delete(obj.metadata.uid);
    },

    /** The cached objects with spec.deletionProtection: true. */
    deletionProtected(cacheOf: (kind: string) => ObjectCache | undefined): KubeObject[] {
      return [...deletionProtected].flatMap((entry) => {
        const i = entry.indexOf("|");
        const [ns, name] = splitKey(entry.slice(i + 1));
        const obj = cacheOf(entry.slice(0, i))?.get(ns, name);
        return obj === undefined ? [] : [obj];
      });
    },

    /** What a scrape reads: the resources' conditions and rotation from their states, the queues' state. */
    stateSource(args: {
      queues: ReadonlyMap<string, WorkQueue>;
      cache: (kind: string) => ObjectCache;
      /** Whether the API server enforces deletion protection (deletion-protection-audit.ts). */
      protectionMissing: () => boolean;
    }): StateSource {
      return {
        resources: (now) => [...states].map(([kind, byKey]) => summarizeStates(kind, byKey.values(), now)),
        queues: () =>
          [...args.queues.entries()].map(([kind, queue]) => ({
            controller: controllerName(kind),
            stats: queue.stats(),
          })),
        objectGauges: (now) => gaugeViews.flatMap(({ gauges, views }) => gauges.samples(views, args.cache, now)),
        deletionProtectionUnenforced: () => {
          const counts = new Map(controllers.map((k) => [k.kind, 0]));
          if (args.protectionMissing())
            for (const entry of deletionProtected) {
              const kind = entry.slice(0, entry.indexOf("|"));
              counts.set(kind, (counts.get(kind) ?? 0) + 1);
            }
          return [...counts].map(([kind, count]) => ({ kind, count }));
        },
      };
    },
  };
}
