import type { Condition, ConditionReason, ConditionType } from "../resources/conditions.ts";

export interface ConditionInput {
  type: ConditionType;
  status: "True" | "False" | "Unknown";
  reason: ConditionReason;
  message: string;
  observedGeneration?: number | undefined;
}

/**
 * meta.SetStatusCondition: replace the condition of the same type, keeping lastTransitionTime unless the status
 * changed, so a reconcile that learns nothing new writes nothing new.
 */
export function setCondition(conditions: readonly Condition[] | undefined, input: ConditionInput, now: Date): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const existing = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastTransitionTime:
      existing !== undefined && existing.status === input.status ? existing.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, "Z"),
    ...(input.observedGeneration === undefined ? {} : { observedGeneration: input.observedGeneration }),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: ConditionType): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Deep equality over JSON values, key order ignored: the "status changed?" test. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => jsonEqual(ao[k], bo[k]));
}
