import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import { jsonEqual, setCondition, type Condition, type ConditionType } from "./conditions.ts";
import { classifyError, messageOf } from "./errors.ts";
import type { EventRecorder } from "./events.ts";

// Status writing shared by both loops (managed and one-shot): only when something changed (no timestamp churn, no
// watch storms), always with the resourceVersion it was computed from, conditions with observedGeneration.

export interface StatusObject extends KubeObject {
  status?: { conditions?: Condition[] | undefined; observedGeneration?: number | undefined; [key: string]: unknown } | undefined;
}

export interface ConditionUpdate {
  type: ConditionType;
  status: "True" | "False";
  reason: string;
  message: string;
}

export const synced: ConditionUpdate = { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" };

/** Merges `fields` and `conditions` into the object's status; returns the object as written (or as it was). */
export async function writeStatus<T extends StatusObject>(
  kube: KubeClient,
  type: ResourceType,
  obj: T,
  fields: Record<string, unknown>,
  conds: ConditionUpdate[],
  now: Date,
): Promise<T> {
  const generation = obj.metadata.generation;
  let conditions = obj.status?.conditions;
  for (const c of conds) conditions = setCondition(conditions, { ...c, observedGeneration: generation }, now);
  // A reconcile that got as far as Synced is no longer stalled.
  if (conds.some((c) => c.type === "Synced")) conditions = unstall(conditions, generation, now);
  const next: Record<string, unknown> = {
    ...(obj.status ?? {}),
    ...fields,
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    ...(conditions === undefined ? {} : { conditions }),
  };
  for (const k of Object.keys(next)) if (next[k] === undefined) delete next[k];
  if (jsonEqual(next, obj.status ?? {})) return obj;
  return kube.patchStatus<T>(type, obj.metadata.namespace, obj.metadata.name, {
    metadata: { resourceVersion: obj.metadata.resourceVersion },
    status: mergePatchOf(obj.status ?? {}, next),
  });
}

/**
 * The JSON merge patch (RFC 7386) from `from` to `to`: changed values, and null for what `to` no longer has (a
 * merge patch would keep a field it does not mention, e.g. a finished rotation's `pending`). Arrays are replaced.
 */
export function mergePatchOf(from: Record<string, unknown>, to: Record<string, unknown>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  for (const [k, v] of Object.entries(to)) {
    if (v === undefined || jsonEqual(v, from[k])) continue;
    patch[k] = isMap(v) && isMap(from[k]) ? mergePatchOf(from[k], v) : v;
  }
  for (const k of Object.keys(from)) if (from[k] !== undefined && to[k] === undefined) patch[k] = null;
  return patch;
}

/** Stalled=False once it was True; absent when it never was (no condition churn on healthy objects). */
function unstall(conditions: Condition[] | undefined, generation: number | undefined, now: Date): Condition[] | undefined {
  if (conditions?.find((x) => x.type === "Stalled")?.status !== "True") return conditions;
  return setCondition(conditions, { type: "Stalled", status: "False", reason: "ReconcileSuccess", message: "", observedGeneration: generation }, now);
}

/**
 * A failed reconcile: one Warning Event, Synced=False with the classified reason and message, Ready=False too if
 * Ready was never set. A terminal error (one only the user can fix) also sets Stalled=True (kstatus) and records
 * observedGeneration: this spec has been looked at; any other error clears Stalled. A 409 is silent (the other
 * writer's watch event requeues the key). Never throws: the requeue follows the error anyway.
 */
export async function reportError(
  deps: { kube: KubeClient; events: EventRecorder },
  type: ResourceType,
  obj: StatusObject,
  err: unknown,
  log: Logger,
  now: Date,
): Promise<void> {
  const c = classifyError(err);
  if (c.conflict) {
    log.debug({ err }, "Conflict; requeued");
    return;
  }
  log.debug({ err }, `Could not reconcile ${type.kind}`);
  const message = messageOf(err);
  deps.events.record(obj, "Warning", c.reason, message);
  const generation = obj.metadata.generation;
  let conditions = setCondition(obj.status?.conditions, { type: "Synced", status: "False", reason: c.reason, message, observedGeneration: generation }, now);
  if (conditions.find((x) => x.type === "Ready") === undefined) {
    conditions = setCondition(conditions, { type: "Ready", status: "False", reason: c.reason, message, observedGeneration: generation }, now);
  }
  conditions = c.terminal
    ? setCondition(conditions, { type: "Stalled", status: "True", reason: c.reason, message, observedGeneration: generation }, now)
    : (unstall(conditions, generation, now) ?? conditions);
  if (jsonEqual(conditions, obj.status?.conditions)) return;
  try {
    await deps.kube.patchStatus(type, obj.metadata.namespace, obj.metadata.name, {
      metadata: { resourceVersion: obj.metadata.resourceVersion },
      status: { conditions, ...(c.terminal && generation !== undefined ? { observedGeneration: generation } : {}) },
    });
  } catch (writeErr) {
    log.debug({ err: writeErr }, "Could not write the error to status");
  }
}

export function splitKey(key: string): [string | undefined, string] {
  const i = key.indexOf("/");
  return i < 0 ? [undefined, key] : [key.slice(0, i) || undefined, key.slice(i + 1)];
}
