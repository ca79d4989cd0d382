import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import { jsonEqual, setCondition, type Condition, type ConditionType } from "./conditions.ts";
import { classifyError, messageOf } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { withProgress } from "./progress.ts";

// Status writing shared by both loops (managed and one-shot): only when something changed (no timestamp churn, no
// watch storms), always with the resourceVersion it was computed from, conditions with observedGeneration, and
// kstatus's Reconciling and Stalled derived from the rest on every write (progress.ts).

export interface StatusObject extends KubeObject {
  status?:
    | { conditions?: Condition[] | undefined; observedGeneration?: number | undefined; [key: string]: unknown }
    | undefined;
}

export interface ConditionUpdate {
  type: ConditionType;
  status: "True" | "False";
  reason: string;
  message: string;
}

export const synced: ConditionUpdate = { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" };

/** A Ready condition: `ok` True, else False, with the reason and message (both loops, every kind). */
export function readyCondition(ok: boolean, reason: string, message: string): ConditionUpdate {
  return { type: "Ready", status: ok ? "True" : "False", reason, message };
}

/** What a status write needs besides the object: the client, and the reasons that stall the object's kind. */
interface StatusDeps {
  kube: KubeClient;
  stalling: ReadonlySet<string>;
}

/** Merges `fields` and `conditions` into the object's status; returns the object as written (or as it was). */
export async function writeStatus<T extends StatusObject>(
  deps: StatusDeps,
  type: ResourceType,
  obj: T,
  fields: Record<string, unknown>,
  conds: ConditionUpdate[],
  now: Date,
): Promise<T> {
  const generation = obj.metadata.generation;
  let conditions = obj.status?.conditions;
  for (const c of conds) conditions = setCondition(conditions, { ...c, observedGeneration: generation }, now);
  const merged: Record<string, unknown> = { ...(obj.status ?? {}), ...fields };
  conditions = withProgress(
    conditions,
    {
      generation,
      deleting: obj.metadata.deletionTimestamp !== undefined,
      rotating: rotationPending(merged),
      consumersNotRolled: consumersNotRolled(merged, now),
      stalling: deps.stalling,
    },
    now,
  );
  const next: Record<string, unknown> = {
    ...merged,
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    conditions,
  };
  for (const k of Object.keys(next)) if (next[k] === undefined) delete next[k];
  if (jsonEqual(next, obj.status ?? {})) return obj;
  return deps.kube.patchStatus<T>(type, obj.metadata.namespace, obj.metadata.name, {
    metadata: { resourceVersion: obj.metadata.resourceVersion },
    status: mergePatchOf(obj.status ?? {}, next),
  });
}

/**
 * The JSON merge patch (RFC 7386) from `from` to `to`: changed values, and null for what `to` no longer has (a
 * merge patch would keep a field it does not mention, e.g. a finished rotation's `pending`). Arrays are replaced.
 */
function mergePatchOf(from: Record<string, unknown>, to: Record<string, unknown>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  for (const [k, v] of Object.entries(to)) {
    if (v === undefined || jsonEqual(v, from[k])) continue;
    patch[k] = isMap(v) && isMap(from[k]) ? mergePatchOf(from[k], v) : v;
  }
  for (const k of Object.keys(from)) if (from[k] !== undefined && to[k] === undefined) patch[k] = null;
  return patch;
}

const rotationPending = (status: Record<string, unknown> | undefined) =>
  (status?.["rotation"] as { pending?: unknown } | undefined)?.pending !== undefined;

/** The message of Reconciling=True ConsumersNotRolled: a retiring connection kept past consumerTimeout, and why. */
function consumersNotRolled(status: Record<string, unknown> | undefined, now: Date): string | undefined {
  const retiring = (
    status?.["rotation"] as
      { retiring?: { id?: unknown; consumersDeadline?: unknown; waitingFor?: unknown } } | undefined
  )?.retiring;
  const waiting = Array.isArray(retiring?.waitingFor) ? retiring.waitingFor.filter((w) => typeof w === "string") : [];
  const deadline = typeof retiring?.consumersDeadline === "string" ? Date.parse(retiring.consumersDeadline) : NaN;
  if (waiting.length === 0 || Number.isNaN(deadline) || now.getTime() < deadline) return undefined;
  return `The replaced credentials are kept: the Secret's consumers did not move within consumerTimeout: ${waiting.join("; ")}`;
}

/**
 * A failed reconcile: one Warning Event, Synced=False with the classified reason and message, Ready=False too if
 * Ready was never set. A terminal error (one only the user can fix) also sets Stalled=True (kstatus) and records
 * observedGeneration: this spec has been looked at; any other error clears Stalled unless its reason is one of
 * the kind's stalling reasons (progress.ts derives Reconciling and Stalled). A 409 is silent (the other
 * writer's watch event requeues the key). Never throws: the requeue follows the error anyway.
 */
export async function reportError(
  deps: StatusDeps & { events: EventRecorder },
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
  if (c.quiet) {
    log.debug({ err }, "Waiting; requeued");
    return;
  }
  log.debug({ err }, `Could not reconcile ${type.kind}`);
  const message = messageOf(err);
  deps.events.record(obj, "Warning", c.reason, message);
  const generation = obj.metadata.generation;
  let conditions = setCondition(
    obj.status?.conditions,
    { type: "Synced", status: "False", reason: c.reason, message, observedGeneration: generation },
    now,
  );
  if (conditions.find((x) => x.type === "Ready") === undefined) {
    conditions = setCondition(
      conditions,
      { type: "Ready", status: "False", reason: c.reason, message, observedGeneration: generation },
      now,
    );
  }
  conditions = withProgress(
    conditions,
    {
      generation,
      deleting: obj.metadata.deletionTimestamp !== undefined,
      rotating: rotationPending(obj.status),
      consumersNotRolled: consumersNotRolled(obj.status, now),
      terminal: c.terminal ? { reason: c.reason, message } : undefined,
      stalling: deps.stalling,
    },
    now,
  );
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
