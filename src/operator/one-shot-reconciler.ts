import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import type { EventRecorder } from "./events.ts";
import { done, failed, type Outcome } from "./outcome.ts";
import {
  readyCondition,
  reportError,
  splitKey,
  synced,
  writeStatus,
  type ConditionUpdate,
  type StatusObject,
} from "./status.ts";

// The loop for one-shot operations (a restore): a resource that asks for one action and records how it ended. It
// shares status writing, conditions (Ready and Synced with observedGeneration), error reporting and requeue rules
// with the managed loop; the kind supplies only its steps:
//   live get → parse (failure → Synced=False InvalidSpec) → finished? → kind's step → Synced=True
// It reads the object live, never from the cache: acting on a stale phase could run a destructive action twice.
// A recurring operation (a schedule: recurringController in controller.ts) runs on the same loop with no final phase.

export interface OneShotHandler<T extends StatusObject> {
  kind: string;
  type: ResourceType;
  /** Parses a raw object; throws TerminalError(InvalidSpec) with a message that says what to fix. */
  parse(raw: KubeObject): T;
  /** The operation ended (a phase that never changes): nothing more to do, ever. */
  finished(obj: T): boolean;
  /** One pass of the operation's steps. Status goes through `run.writeStatus`; errors are thrown, typed. */
  step(run: OneShotRun<T>): Promise<Outcome>;
}

/** A recurring operation's handler (a schedule): a one-shot handler with no final phase (recurringController). */
export type RecurringHandler<T extends StatusObject> = Omit<OneShotHandler<T>, "finished">;

export interface OneShotRun<T extends StatusObject> {
  /** The object as last written. */
  readonly obj: T;
  readonly log: Logger;
  now(): Date;
  /** Merges `fields` into status with the given Ready condition and Synced=True (none: fields only); only when something changed. */
  writeStatus(fields: Record<string, unknown>, ready?: ConditionUpdate): Promise<T>;
}

/**
 * Ready of an operation, following its phase: True (Available) in one of the `ok` phases; otherwise the reason the
 * step gave, else the phase's own (`Running`, `Failed`; `Pending` for any other). The message is status.message.
 */
export function operationReady(
  status: { phase?: string | undefined; message?: string | undefined },
  reason: string | undefined,
  reasons: { ok: readonly string[]; Pending: string; Running: string; Failed: string },
): ConditionUpdate {
  const phase = status.phase ?? "Pending";
  const ok = reasons.ok.includes(phase);
  const fallback = phase === "Failed" ? reasons.Failed : phase === "Running" ? reasons.Running : reasons.Pending;
  return readyCondition(ok, ok ? "Available" : (reason ?? fallback), status.message ?? "");
}

export interface OneShotDeps {
  kube: KubeClient;
  /** The reasons that stall this kind (progress.ts). */
  stalling: ReadonlySet<string>;
  events: EventRecorder;
  logger: Logger;
  now?: () => Date;
}

/**
 * A phase this version cannot read (lenient.ts left it out) was written by a newer version, after this version's
 * last word on it: the operation is that version's now. A one-shot operation must never run twice, so this one
 * leaves it alone, status untouched.
 */
function newerPhase(raw: KubeObject, parsed: StatusObject): boolean {
  const phase = (raw["status"] as { phase?: unknown } | undefined)?.phase;
  return typeof phase === "string" && parsed.status?.["phase"] === undefined;
}

export async function reconcileOneShot<T extends StatusObject>(
  deps: OneShotDeps,
  handler: OneShotHandler<T>,
  key: string,
): Promise<Outcome> {
  const [namespace, name] = splitKey(key);
  const raw = await deps.kube.get<KubeObject>(handler.type, namespace, name);
  if (raw === undefined) return done();
  const log = deps.logger.child({ namespace, name, generation: raw.metadata.generation });
  const now = deps.now ?? (() => new Date());
  let obj: StatusObject = raw;
  try {
    const parsed = handler.parse(raw);
    obj = parsed;
    if (handler.finished(parsed) || newerPhase(raw, parsed)) return done();
    const run: OneShotRun<T> = {
      get obj() {
        return obj as T;
      },
      log,
      now,
      async writeStatus(fields, ready) {
        obj = await writeStatus(
          deps,
          handler.type,
          obj as T,
          fields,
          ready === undefined ? [] : [ready, synced],
          now(),
        );
        return obj as T;
      },
    };
    return await handler.step(run);
  } catch (err) {
    await reportError(deps, handler.type, obj, err, log, now());
    return failed(err);
  }
}

/** One pass of a recurring operation: the one-shot loop with no final phase (it never finishes). */
export function reconcileRecurring<T extends StatusObject>(
  deps: OneShotDeps,
  handler: RecurringHandler<T>,
  key: string,
): Promise<Outcome> {
  return reconcileOneShot(deps, { ...handler, finished: () => false }, key);
}
