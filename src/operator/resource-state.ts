import type { KubeObject } from "../kube/types.ts";
import type { ResourceSummary } from "./metrics.ts";

// What the informer cache says about the resources of one kind, for the scrape-time gauges of metrics.ts: counts by
// condition, the longest wait for Ready, and credentials rotation that is late. Labels stay bounded: a kind, a
// condition type and status, and a reason (CamelCase words the loops write; anything else counts as "Other").

const conditionTypes = new Set(["Ready", "Synced", "Reconciling", "Stalled"]);
const reasonPattern = /^[A-Z][A-Za-z0-9]{0,63}$/;

interface StatusView {
  conditions?: { type?: unknown; status?: unknown; reason?: unknown; lastTransitionTime?: unknown }[];
  rotation?: { nextRotationTime?: unknown; retiring?: { revokeAt?: unknown; consumersDeadline?: unknown } };
}

/**
 * What the scrape reads of one object, computed once per change (from the informer's event) and kept: a scrape then
 * aggregates these instead of unpacking every cached object (at 10,000 Databases, unpacking the cache twice per scrape
 * stalled the operator's event loop for seconds, long enough to lose its Lease). Small on purpose: a Ready resource
 * with no rotation pending (nearly all of them) is just its conditions, a string shared by all alike; otherwise the
 * conditions and three times (NaN: none).
 */
export type ResourceState = string | TimedResourceState;

interface TimedResourceState {
  /** "type|status|reason" of each counted condition, joined by ";" (Ready Unknown "" when Ready is unset); interned. */
  conditions: string;
  /** Since when it has been without Ready=True (the transition, or its creation); NaN when Ready or unknown. */
  notReadySince: number;
  nextRotation: number;
  revokeAt: number;
}

/** One string per distinct set of conditions: 10,000 Ready Databases share one. Bounded like the labels it holds. */
const interned = new Map<string, string>();
const intern = (s: string) => {
  const found = interned.get(s);
  if (found !== undefined) return found;
  if (interned.size < 10_000) interned.set(s, s);
  return s;
};

export function resourceStateOf(obj: KubeObject): ResourceState {
  const status = (obj["status"] ?? {}) as StatusView;
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const counted: string[] = [];
  let ready: (typeof conditions)[number] | undefined;
  for (const c of conditions) {
    if (typeof c.type !== "string" || !conditionTypes.has(c.type)) continue;
    if (c.type === "Ready") ready = c;
    const value = c.status === "True" || c.status === "False" ? c.status : "Unknown";
    counted.push(
      `${c.type}|${value}|${typeof c.reason === "string" && reasonPattern.test(c.reason) ? c.reason : "Other"}`,
    );
  }
  if (ready === undefined) counted.push("Ready|Unknown|");
  const state = {
    conditions: intern(counted.join(";")),
    notReadySince:
      ready?.status === "True"
        ? NaN
        : (timeOf(ready?.lastTransitionTime) ?? timeOf(obj.metadata.creationTimestamp) ?? NaN),
    nextRotation: timeOf(status.rotation?.nextRotationTime) ?? NaN,
    // While a rotation waits for its consumers (within consumerTimeout) the replaced login is kept on purpose.
    revokeAt:
      timeOf(status.rotation?.retiring?.consumersDeadline) ?? timeOf(status.rotation?.retiring?.revokeAt) ?? NaN,
  };
  const timed =
    !Number.isNaN(state.notReadySince) || !Number.isNaN(state.nextRotation) || !Number.isNaN(state.revokeAt);
  return timed ? state : state.conditions;
}

/** The kind's summary from its objects' states: no object is read. */
export function summarizeStates(kind: string, states: Iterable<ResourceState>, now: number): ResourceSummary {
  const bySet = new Map<string, number>();
  let longestNotReadyMs = 0;
  let rotationOverdue = 0;
  let retiringPastRevoke = 0;
  for (const state of states) {
    if (typeof state === "string") {
      bySet.set(state, (bySet.get(state) ?? 0) + 1);
      continue;
    }
    const s = state;
    bySet.set(s.conditions, (bySet.get(s.conditions) ?? 0) + 1);
    if (!Number.isNaN(s.notReadySince)) longestNotReadyMs = Math.max(longestNotReadyMs, now - s.notReadySince);
    if (s.nextRotation <= now) rotationOverdue++;
    if (s.revokeAt <= now) retiringPastRevoke++;
  }
  const counts = new Map<string, { type: string; status: string; reason: string; count: number }>();
  for (const [set, n] of bySet) {
    for (const key of set.split(";")) {
      const entry = counts.get(key);
      if (entry) entry.count += n;
      else {
        const [type = "", status = "", reason = ""] = key.split("|");
        counts.set(key, { type, status, reason, count: n });
      }
    }
  }
  return {
    kind,
    conditions: [...counts.values()],
    longestNotReadySeconds: longestNotReadyMs / 1000,
    rotationOverdue,
    retiringPastRevoke,
  };
}

export function summarizeResources(kind: string, objects: Iterable<KubeObject>, now: number): ResourceSummary {
  const states: ResourceState[] = [];
  for (const obj of objects) states.push(resourceStateOf(obj));
  return summarizeStates(kind, states, now);
}

function timeOf(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  const t = Date.parse(value);
  return Number.isFinite(t) ? t : undefined;
}
