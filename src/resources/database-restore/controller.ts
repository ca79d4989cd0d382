import type { CrashPoint } from "../../operator/crash-points.ts";
import { defaultReplayWindowMs } from "../remote/replay-window.ts";
import { mayHaveLanded } from "../../operator/api.ts";
import { ReconcileError, TerminalError } from "../../operator/errors.ts";
import { isoSeconds } from "../../operator/time.ts";
import { acceptedDatabaseId } from "../remote/accepted-database.ts";
import { jsonEqual } from "../../operator/conditions.ts";
import { credentialStatusOf } from "../../operator/credentials.ts";
import { resolveCredentials, oneShotController, parseOrTerminal } from "../../operator/controller.ts";
import { operationReady, type OneShotHandler, type OneShotRun } from "../../operator/one-shot-reconciler.ts";
import { readOperationTarget, Refused } from "../remote/operations.ts";
import { done, requeueAfter, type Outcome } from "../../operator/outcome.ts";
import { remoteDatabaseStallingReasons, resolveBackup } from "../remote/database.ts";
import { DatabaseRestoreType } from "./schema.ts";
import { readDatabase } from "../database/read.ts";
import { typedReader } from "../kit/read.ts";
import { DatabaseType } from "../database/schema.ts";
import { followRestore, sourceKeyOf, startRestore } from "./operation.ts";
import { ledgerHas, recordLedger } from "./ledger.ts";
import { DatabaseRestore, terminalRestorePhases, type DatabaseRestoreStatus } from "./schema.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";

// Restore exactly once (docs/design.md#restore-exactly-once). A restore destroys data and GitOps re-applies manifests, so it runs at most once per idempotencyKey and target:
// - the key is looked up in the target's ledger (Database status and its connection Secret, which outlives it);
// - requestedAt (and the target's source) is written before the POST. A POST whose outcome is unknown (a crash, a
//   lost answer) is sent again only to a server that announced Idempotency-Key replay, within its window. Any other
//   server (the public API ignores the key) is not asked twice: the target is observed instead (recovering, or its
//   source changed to the requested backup: it ran), else the phase is Failed with reason OutcomeUnknown.

type RestoreObject = DatabaseRestore & { metadata: { name: string; namespace?: string | undefined } };
type Run = OneShotRun<RestoreObject>;

export interface RestoreSettings {
  /** How long after requestedAt an interrupted request is re-sent (remote/replay-window.ts). */
  replayWindowMs?: number | undefined;
}

/** Where a test may simulate a crash (src/operator/crash-points.ts): around the one POST that restores. */
const restoreCrashPoints = {
  beforePost: {
    name: "restore:before-post",
    between: "a restore's `requestedAt` and ledger entry written → the restore requested",
    restart: "re-send only to a server that replays, else observe the target; `OutcomeUnknown` if it cannot tell",
  },
  afterPost: {
    name: "restore:after-post",
    between: "the restore requested → its outcome followed",
    restart: "the same: never a second restore",
  },
} as const satisfies Record<string, CrashPoint>;

const readRestore = typedReader(DatabaseRestore).read;

/** Ready follows the phase: True once it Succeeded or was Skipped. */
const readyOf = (status: DatabaseRestoreStatus, reason: string | undefined) =>
  operationReady(status, reason, {
    ok: ["Succeeded", "Skipped"],
    Pending: "DatabaseNotReady",
    Running: "Restoring",
    Failed: "RemoteFailure",
  });

// eslint-disable-next-line max-lines-per-function -- a factory: its closure holds what this process knows of each restore key (acknowledged, not sent, ledgered)
export function restoreHandler(
  ctx: Pick<
    MdsControllerContext,
    | "pool"
    | "defaultCredentials"
    | "cache"
    | "secrets"
    | "kube"
    | "events"
    | "crashPoint"
    | "pollIntervals"
    | "accepted"
  >,
  settings: RestoreSettings = {},
): OneShotHandler<RestoreObject> {
  const replayWindowMs = settings.replayWindowMs ?? defaultReplayWindowMs;
  const ledger = { kube: ctx.kube, databases: ctx.cache(DatabaseType.kind), secrets: ctx.secrets };
  // Keys whose POST the service has acknowledged in this process; after a restart one replay-safe re-POST confirms.
  const acknowledged = new Set<string>();
  // Keys with no POST that may have acted: requested in this process and every POST so far refused (a 4xx).
  const notSent = new Set<string>();

  // Keys whose Running ledger entry this process wrote.
  const ledgered = new Set<string>();

  async function recordRunning(run: Run, target: { ns: string; name: string | undefined; id: string }, key: string) {
    const s = run.obj.status ?? {};
    await recordLedger(ledger, target.ns, target.name, target.id, {
      key,
      phase: "Running",
      ...(s.requestedAt === undefined ? {} : { requestedAt: s.requestedAt }),
      restore: run.obj.metadata.name,
      ...(s.backupId === undefined ? {} : { backupId: s.backupId }),
      ...(s.sourceDatabaseId === undefined ? {} : { sourceDatabaseId: s.sourceDatabaseId }),
    });
    ledgered.add(`${target.id}|${key}`);
  }

  const write = (run: Run, fields: Partial<DatabaseRestoreStatus>) =>
    run.writeStatus(fields, readyOf({ ...(run.obj.status ?? {}), ...fields }, fields.reason));

  async function finish(
    run: Run,
    target: { ns: string; name: string | undefined; id: string },
    key: string,
    phase: "Succeeded" | "Failed",
    reason: string,
    message: string,
  ): Promise<Outcome> {
    const s = run.obj.status ?? {};
    const completedAt = isoSeconds(run.now());
    await recordLedger(ledger, target.ns, target.name, target.id, {
      key,
      phase,
      completedAt,
      restore: run.obj.metadata.name,
      ...(s.requestedAt === undefined ? {} : { requestedAt: s.requestedAt }),
      ...(s.backupId === undefined ? {} : { backupId: s.backupId }),
      ...(s.sourceDatabaseId === undefined ? {} : { sourceDatabaseId: s.sourceDatabaseId }),
    });
    const written = await write(run, { phase, reason, message, completedAt });
    ctx.events.record(
      written,
      phase === "Succeeded" ? "Normal" : "Warning",
      phase === "Succeeded" ? "RestoreSucceeded" : reason,
      message,
    );
    run.log.info({ phase, reason }, "Restore finished");
    return done();
  }

  // eslint-disable-next-line max-lines-per-function -- the restore's steps in the order the exactly-once argument needs (docs/design.md#restore-exactly-once): split, that order would be scattered
  async function step(run: Run): Promise<Outcome> {
    const obj = run.obj;
    const ns = obj.metadata.namespace ?? "default";
    const restoreKey = obj.spec.idempotencyKey ?? `${ns}/${obj.metadata.name}`;
    const targetName = obj.spec.target.databaseRef?.name;
    const targetDb = targetName === undefined ? undefined : ctx.cache(DatabaseType.kind).get(ns, targetName);
    // Everything is resolved from the spec. Status is the record of a started restore, but anyone who may write the
    // status subresource writes it too: it is used only where it agrees with what the spec resolves to, else the
    // spec's "by id needs spec.credentials" rule could be sidestepped by naming the ids in status.
    // A Database's id counts once its own loop accepted it (accepted.ts), never because its status names it.
    const targetId =
      obj.spec.target.databaseId ??
      acceptedDatabaseId(ctx.accepted, targetDb, { namespace: ns, name: targetName ?? "" });
    const target = { ns, name: targetName, id: targetId };
    if (obj.status?.requestedAt === undefined && readDatabase(targetDb)?.spec.managementPolicy === "ObserveOnly") {
      // ObserveOnly promises the operator never changes the database, through any resource.
      throw new TerminalError(
        "ReferenceNotAllowed",
        `target database "${targetName}" is ObserveOnly: the operator does not restore into it; set its managementPolicy to Full first`,
      );
    }
    // The token: the restore's own, else the one that manages the target Database resource. By id (target or
    // source) only with the restore's own: the operator's token is never lent to act on an arbitrary database.
    if (
      (obj.spec.target.databaseId !== undefined || obj.spec.source.databaseId !== undefined) &&
      obj.spec.credentials === undefined
    ) {
      throw new TerminalError(
        "InvalidSpec",
        "a restore by databaseId (target or source) needs spec.credentials.secretRef (a token of the database's workspace in this namespace)",
      );
    }
    const sourceName = obj.spec.source.databaseRef?.name;
    const sourceIdOfSpec = () => {
      if (obj.spec.source.databaseId !== undefined) return obj.spec.source.databaseId;
      const source = sourceName === undefined ? undefined : ctx.cache(DatabaseType.kind).get(ns, sourceName);
      return acceptedDatabaseId(ctx.accepted, source, { namespace: ns, name: sourceName ?? "" });
    };
    /** Whether the status' resolved restore is the one the spec asks for (a `latest` backup is resolved once, so any). */
    const recordedAgrees = (sourceId: string) => {
      const s = obj.status ?? {};
      const backupOk =
        s.backupId !== undefined && (obj.spec.source.backupId === undefined || s.backupId === obj.spec.source.backupId);
      return s.targetDatabaseId === targetId && s.sourceDatabaseId === sourceId && backupOk;
    };
    if (obj.status?.requestedAt !== undefined && !recordedAgrees(sourceIdOfSpec())) {
      // Requested (perhaps sent) for other ids than the spec resolves to now: neither repeated nor followed.
      const s = obj.status;
      throw new TerminalError(
        "OutcomeUnknown",
        `status records a restore of backup "${s.backupId ?? "?"}" of database "${s.sourceDatabaseId ?? "?"}" into "${s.targetDatabaseId ?? "?"}", but the spec resolves to target "${targetId}" and source "${sourceIdOfSpec()}"; nothing is done. Create a new DatabaseRestore`,
      );
    }
    const spec =
      obj.spec.credentials !== undefined ? { credentials: obj.spec.credentials } : (readDatabase(targetDb)?.spec ?? {});
    const remote = await resolveCredentials(ctx, ns, spec);
    const { api, use } = remote;
    // Which token acts is recorded before it does anything (written only when it changes).
    if (!jsonEqual(obj.status?.credentials, credentialStatusOf(use)))
      await run.writeStatus({ credentials: credentialStatusOf(use) });

    if (obj.status?.requestedAt === undefined) {
      if (ledgerHas(ledger, ns, targetName, targetId, restoreKey)) {
        const message = `A restore with idempotencyKey "${restoreKey}" was already applied to database "${targetId}"; use a new key to restore again`;
        const written = await write(run, {
          phase: "Skipped",
          reason: "ReconcileSuccess",
          idempotencyKey: restoreKey,
          targetDatabaseId: targetId,
          message,
          completedAt: isoSeconds(run.now()),
        });
        ctx.events.record(
          written,
          "Normal",
          "Skipped",
          `Restore "${restoreKey}" already applied to database "${targetId}"`,
        );
        return done();
      }
      const sourceId = sourceIdOfSpec();
      if (!recordedAgrees(sourceId)) {
        const backupId = await resolveBackup(api, sourceId, obj.spec.source.backupId);
        // `latest` resolves once: recorded before anything else happens.
        const message = `Restoring backup "${backupId}" into database "${targetId}"`;
        await write(run, {
          phase: "Pending",
          idempotencyKey: restoreKey,
          targetDatabaseId: targetId,
          sourceDatabaseId: sourceId,
          backupId,
          message,
        });
      }
      const { database: db } = await readOperationTarget(api, targetId);
      if (db.status === "provisioning" || db.status === "recovering") {
        await write(run, {
          phase: "Pending",
          message: `Waiting for database "${targetId}" (status ${db.status}) before restoring`,
        });
        return requeueAfter(ctx.pollIntervals.fastMs);
      }
      const requestedAt = isoSeconds(run.now());
      await write(run, {
        phase: "Running",
        requestedAt,
        targetSourceBefore: sourceKeyOf(db.source),
        reason: "Restoring",
        message: `Restore of backup "${run.obj.status?.backupId}" requested`,
      });
      notSent.add(`${targetId}|${restoreKey}`);
      await recordRunning(run, target, restoreKey);
      await ctx.crashPoint(restoreCrashPoints.beforePost.name);
    }
    const s = run.obj.status ?? {};
    const { backupId, sourceDatabaseId: sourceId, requestedAt } = s;
    if (backupId === undefined || sourceId === undefined || requestedAt === undefined) {
      throw new ReconcileError("ReconcileError", "restore status lost its resolved backup; refusing to guess");
    }
    const ackKey = `${targetId}|${restoreKey}`;
    if (!acknowledged.has(ackKey) && !notSent.has(ackKey)) {
      // A POST may have acted without us seeing its answer. The read also tells whether this server replays.
      const { database: current, onRequest } = await readOperationTarget(api, targetId);
      if (!onRequest) {
        const requested = sourceKeyOf({ type: "backup", databaseId: sourceId, backupId });
        if (
          current.status === "recovering" ||
          (sourceKeyOf(current.source) === requested && s.targetSourceBefore !== requested)
        ) {
          acknowledged.add(ackKey);
        } else {
          const message = `The restore was requested at ${requestedAt} but its answer was lost, the service does not replay requests and database "${targetId}" shows no sign of it; it is not repeated. Check the database's data, then create a new DatabaseRestore if needed`;
          return finish(run, target, restoreKey, "Failed", "OutcomeUnknown", message);
        }
      } else if (run.now().getTime() - Date.parse(requestedAt) > replayWindowMs) {
        const message = `The restore was requested at ${requestedAt} and its outcome cannot be known any more; it is not repeated. Check the database's data, then create a new DatabaseRestore if needed`;
        return finish(run, target, restoreKey, "Failed", "OutcomeUnknown", message);
      }
    }
    if (!acknowledged.has(ackKey)) {
      // The ledger entry precedes every POST, also one retried after its first write failed or after a restart.
      if (!ledgered.has(ackKey)) await recordRunning(run, target, restoreKey);
      try {
        await startRestore(api, targetId, sourceId, backupId, restoreKey);
      } catch (err) {
        if (mayHaveLanded(err) || err instanceof Refused) notSent.delete(ackKey);
        if (!(err instanceof Refused)) throw err;
        const message = `The service refused the restore: ${err.message}`;
        return finish(run, target, restoreKey, "Failed", "RemoteFailure", message);
      }
      notSent.delete(ackKey);
      acknowledged.add(ackKey);
      await ctx.crashPoint(restoreCrashPoints.afterPost.name);
      run.log.info({ targetId, backupId }, "Requested restore");
      ctx.events.record(
        run.obj,
        "Normal",
        "RestoreStarted",
        `Restoring backup "${backupId}" into database "${targetId}"`,
      );
    }
    const db = await followRestore(remote, targetId);
    if (db.status === "recovering" || db.status === "provisioning") return requeueAfter(ctx.pollIntervals.fastMs);
    acknowledged.delete(ackKey);
    if (db.status === "failure") {
      return finish(
        run,
        target,
        restoreKey,
        "Failed",
        "RemoteFailure",
        `The service reports the restore failed; database "${targetId}" keeps its previous data`,
      );
    }
    return finish(
      run,
      target,
      restoreKey,
      "Succeeded",
      "Available",
      `Restored backup "${backupId}" into database "${targetId}"`,
    );
  }

  return {
    kind: "DatabaseRestore",
    type: DatabaseRestoreType,
    parse: (raw) => parseOrTerminal(DatabaseRestore, "DatabaseRestore", raw) as RestoreObject,
    finished: (obj) => obj.status?.phase !== undefined && terminalRestorePhases.includes(obj.status.phase),
    step,
  };
}

export function restoreController(settings: RestoreSettings = {}) {
  return oneShotController(
    {
      kind: "DatabaseRestore",
      type: DatabaseRestoreType,
      crashPoints: Object.values(restoreCrashPoints),
      stallingReasons: ["ReferenceNotAllowed", "OutcomeUnknown", ...remoteDatabaseStallingReasons],
      // Restores are few and each waits on the service: two workers at most.
      workers: (concurrency) => Math.max(1, Math.min(concurrency, 2)),
      // A target that gets its remote id, or finishes provisioning, wakes the restores still waiting in its namespace.
      wakeOn: [
        {
          kind: DatabaseType.kind,
          keys: (db, restores) =>
            restores
              .list(db.metadata.namespace ?? "")
              .filter((r) => {
                const phase = readRestore(r)?.status?.phase;
                return (
                  r.metadata.namespace === db.metadata.namespace &&
                  (phase === undefined || phase === "Pending" || phase === "Running")
                );
              })
              .map((r) => `${r.metadata.namespace ?? ""}/${r.metadata.name}`),
        },
      ],
    },
    (ctx: MdsControllerContext) => restoreHandler(ctx, settings),
  );
}
