import type { KubeObject } from "../kube/types.ts";
import type { ResourceSummary } from "./metrics.ts";

// What the informer cache says about the resources of one kind, for the scrape-time gauges of metrics.ts: counts by
// condition, the longest wait for Ready, and credentials rotation that is late. Labels stay bounded: a kind, a
// condition type and status, and a reason (CamelCase words the loops write; anything else counts as "Other").

const conditionTypes = new Set(["Ready", "Synced", "Reconciling", "Stalled"]);
const reasonPattern = /^[A-Z][A-Za-z0-9]{0,63}$/;

interface StatusView {
  conditions?: { type?: unknown; status?: unknown; reason?: unknown; lastTransitionTime?: unknown }[];
  rotation?: { nextRotationTime?: unknown; retiring?: { revokeAt?: unknown } };
}

export function summarizeResources(kind: string, objects: Iterable<KubeObject>, now: number): ResourceSummary {
  const counts = new Map<string, { type: string; status: string; reason: string; count: number }>();
  const bump = (type: string, status: string, reason: string) => {
    const key = `${type}|${status}|${reason}`;
    const entry = counts.get(key);
    if (entry) entry.count++;
    else counts.set(key, { type, status, reason, count: 1 });
  };
  let longestNotReadyMs = 0;
  let rotationOverdue = 0;
  let retiringPastRevoke = 0;
  for (const obj of objects) {
    const status = (obj["status"] ?? {}) as StatusView;
    const conditions = Array.isArray(status.conditions) ? status.conditions : [];
    let ready: (typeof conditions)[number] | undefined;
    for (const c of conditions) {
      if (typeof c.type !== "string" || !conditionTypes.has(c.type)) continue;
      if (c.type === "Ready") ready = c;
      const value = c.status === "True" || c.status === "False" ? c.status : "Unknown";
      bump(c.type, value, typeof c.reason === "string" && reasonPattern.test(c.reason) ? c.reason : "Other");
    }
    if (ready === undefined) bump("Ready", "Unknown", "");
    if (ready?.status !== "True") {
      const since = timeOf(ready?.lastTransitionTime) ?? timeOf(obj.metadata.creationTimestamp);
      if (since !== undefined) longestNotReadyMs = Math.max(longestNotReadyMs, now - since);
    }
    const next = timeOf(status.rotation?.nextRotationTime);
    if (next !== undefined && next <= now) rotationOverdue++;
    const revokeAt = timeOf(status.rotation?.retiring?.revokeAt);
    if (revokeAt !== undefined && revokeAt <= now) retiringPastRevoke++;
  }
  return {
    kind,
    conditions: [...counts.values()],
    longestNotReadySeconds: longestNotReadyMs / 1000,
    rotationOverdue,
    retiringPastRevoke,
  };
}

function timeOf(value: unknown): number | undefined {
  if (typeof value !== "string") return undefined;
  const t = Date.parse(value);
  return Number.isFinite(t) ? t : undefined;
}
