import type { CrashPoint } from "../../operator/crash-points.ts";
import { defaultReplayWindowMs } from "../remote/replay-window.ts";
import { mayHaveLanded } from "../../operator/api.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { ReconcileError, TerminalError, WaitingError } from "../../operator/errors.ts";
import { isoSeconds } from "../../operator/time.ts";
import { acceptedDatabaseId } from "../remote/accepted-database.ts";
import { jsonEqual } from "../../operator/conditions.ts";
import { credentialStatusOf } from "../../operator/credentials.ts";
import { resolveCredentials, oneShotController, parseOrTerminal } from "../../operator/controller.ts";
import { remoteDatabaseStallingReasons } from "../remote/database.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";
import { operationReady, type OneShotHandler, type OneShotRun } from "../../operator/one-shot-reconciler.ts";
import { notSupportedMessage, readOperationTarget, Refused } from "../remote/operations.ts";
import { backupRequestKey, findBackup, requestBackup, type BackupRefusal } from "./operation.ts";
import { done, requeueAfter, type Outcome } from "../../operator/outcome.ts";
import { DatabaseBackup, DatabaseBackupType, terminalBackupPhases, type DatabaseBackupStatus } from "./schema.ts";
import { backupSealMessage, forgetLatestBackup } from "../remote/backups.ts";

// One backup per resource, exactly once, against a service that takes backups on request (our service's
// POST /v1/databases/{id}/backups). The order of writes is what makes it safe:
// - requestedAt and the key are written to status before the POST, which carries an Idempotency-Key derived from
//   the database, the namespace and the key (the resource's uid unless spec.idempotencyKey names one);
// - the POST's answer (the backup's id) is written to status at once; from then on the backup is only followed;
// - a POST whose outcome is unknown (a crash, a lost answer) is sent again only to a server that announced
//   Idempotency-Key replay, within its window (it answers with the same backup); otherwise the phase is Failed with
//   reason OutcomeUnknown, never a second request;
// - a server that does not take backups on request (the public API: its provider takes them, it has no such endpoint
//   and announces no replay) is never sent a POST: phase Failed, reason NotSupported, Stalled, and nothing more.
// Status is anyone's who may write the subresource: what it records is used only where it agrees with the spec.

const backupCrashPoints = {
  beforePost: {
    name: "backup:before-post",
    between: "a backup's `requestedAt` and key written (phase Running) → the backup requested",
    restart: "send the POST with the same Idempotency-Key only to a server that replays it, else `OutcomeUnknown`",
  },
  afterPost: {
    name: "backup:after-post",
    between: "the service answered the POST with the backup's id → the id written to status",
    restart: "the POST again with the same key gets the same backup back (replayed): never a second backup",
  },
} as const satisfies Record<string, CrashPoint>;

type BackupObject = DatabaseBackup & { metadata: { name: string; namespace?: string | undefined } };
type Run = OneShotRun<BackupObject>;

export interface BackupSettings {
  /** How long after requestedAt an interrupted request is re-sent (remote/replay-window.ts). */
  replayWindowMs?: number | undefined;
}

/** Ready follows the phase: True once it Succeeded. */
const readyOf = (status: DatabaseBackupStatus, reason: string | undefined) =>
  operationReady(status, reason, {
    ok: ["Succeeded"],
    Pending: "DatabaseNotReady",
    Running: "BackingUp",
    Failed: "RemoteFailure",
  });

/** What a server that takes no backups on request is told of (remote/operations.ts). */
const notSupportedWhat = {
  verbs: "take",
  methods: "POST",
  outcome: "no backup was requested",
  listed: "where available",
};

// eslint-disable-next-line max-lines-per-function -- closure factory: its step and helpers share the context
export function backupHandler(
  ctx: Pick<
    MdsControllerContext,
    "pool" | "defaultCredentials" | "cache" | "events" | "crashPoint" | "pollIntervals" | "accepted"
  >,
  settings: BackupSettings = {},
): OneShotHandler<BackupObject> {
  const replayWindowMs = settings.replayWindowMs ?? defaultReplayWindowMs;
  // Request keys whose POST this process has not sent yet, or whose every POST the service refused (a 4xx): a POST
  // may be sent (again) without any doubt. After a restart the set is empty: only a replaying server is asked again.
  const notSent = new Set<string>();

  const write = (run: Run, fields: Partial<DatabaseBackupStatus>) =>
    run.writeStatus(fields, readyOf({ ...(run.obj.status ?? {}), ...fields }, fields.reason));

  async function finish(
    run: Run,
    phase: "Succeeded" | "Failed",
    reason: string,
    message: string,
    fields: Partial<DatabaseBackupStatus> = {},
  ): Promise<Outcome> {
    const written = await write(run, { ...fields, phase, reason, message, completedAt: isoSeconds(run.now()) });
    ctx.events.record(
      written,
      phase === "Succeeded" ? "Normal" : "Warning",
      phase === "Succeeded" ? "BackupSucceeded" : reason,
      message,
    );
    run.log.info({ phase, reason }, "Backup finished");
    return done();
  }

  /** The server takes backups on request only if it announced replay (our service); learned from any answer. */
  const notSupportedFinish = (run: Run, databaseId: string) =>
    finish(run, "Failed", "NotSupported", notSupportedMessage(databaseId, notSupportedWhat), { databaseId });

  /** POSTs the backup and records its answer (sealed); a refusal ends the backup, or waits for its database. */
  async function post(
    run: Run,
    remote: { api: MdsApi; seal: (message: string) => string },
    databaseId: string,
    requestKey: string,
  ): Promise<Outcome | undefined> {
    let backup;
    try {
      backup = await requestBackup(remote.api, databaseId, requestKey);
    } catch (err) {
      if (!(err instanceof Refused)) {
        if (mayHaveLanded(err)) notSent.delete(requestKey);
        throw err;
      }
      const why = (err as Refused<BackupRefusal>).why;
      if (why === "NotSupported") return notSupportedFinish(run, databaseId);
      if (why === "DatabaseGone")
        throw new WaitingError("DatabaseNotReady", `database "${databaseId}" was not found when backing it up`);
      return finish(run, "Failed", "RemoteFailure", `The service refused the backup: ${err.message}`);
    }
    notSent.delete(requestKey);
    await ctx.crashPoint(backupCrashPoints.afterPost.name);
    const uid = run.obj.metadata.uid;
    await write(run, {
      backupId: backup.id,
      ...(uid === undefined ? {} : { backupSeal: remote.seal(backupSealMessage(uid, databaseId, backup.id)) }),
      takenAt: isoSeconds(backup.createdAt),
      message: `Backup "${backup.id}" of database "${databaseId}" requested`,
    });
    ctx.events.record(run.obj, "Normal", "BackupStarted", `Backing up database "${databaseId}" as "${backup.id}"`);
    return undefined;
  }

  // eslint-disable-next-line max-lines-per-function -- the backup's steps in the order the exactly-once argument needs (docs/design.md#restore-exactly-once, the same for backups): split, that order would be scattered
  async function step(run: Run): Promise<Outcome> {
    const obj = run.obj;
    const ns = obj.metadata.namespace ?? "default";
    const key = obj.spec.idempotencyKey ?? obj.metadata.uid ?? `${ns}/${obj.metadata.name}`;
    const refName = obj.spec.databaseRef?.name;
    const db = refName === undefined ? undefined : ctx.cache("Database").get(ns, refName);
    // The database comes from the spec: a Database of this namespace (the id its own loop accepted, accepted.ts) or
    // an id with this namespace's own token. Never from status: anyone who may write it could name another's database.
    const databaseId =
      obj.spec.databaseId ?? acceptedDatabaseId(ctx.accepted, db, { namespace: ns, name: refName ?? "" });
    if (obj.spec.databaseId !== undefined && obj.spec.credentials === undefined) {
      throw new TerminalError(
        "InvalidSpec",
        "a backup by databaseId needs spec.credentials.secretRef (a token of the database's workspace in this namespace)",
      );
    }
    const s = obj.status ?? {};
    if (s.requestedAt !== undefined && (s.databaseId !== databaseId || s.idempotencyKey !== key)) {
      // Requested (perhaps sent) for another database or key than the spec resolves to: neither repeated nor followed.
      throw new TerminalError(
        "OutcomeUnknown",
        `status records a backup of database "${s.databaseId ?? "?"}" with key "${s.idempotencyKey ?? "?"}", but the spec resolves to database "${databaseId}" and key "${key}"; nothing is done. Create a new DatabaseBackup`,
      );
    }
    const spec =
      obj.spec.credentials !== undefined
        ? { credentials: obj.spec.credentials }
        : ((db?.["spec"] ?? {}) as { credentials?: { secretRef: { name: string; key?: string } } });
    const remote = await resolveCredentials(ctx, ns, spec);
    const { api, use } = remote;
    if (!jsonEqual(s.credentials, credentialStatusOf(use)))
      await run.writeStatus({ credentials: credentialStatusOf(use) });
    const requestKey = backupRequestKey(databaseId, ns, key);

    if (s.requestedAt === undefined) {
      // The read also tells whether this server replays Idempotency-Keys, i.e. whether it is our service.
      const { database: remote, onRequest } = await readOperationTarget(api, databaseId);
      if (!onRequest) return notSupportedFinish(run, databaseId);
      if (remote.status !== "ready") {
        await write(run, {
          phase: "Pending",
          databaseId,
          idempotencyKey: key,
          message: `Waiting for database "${databaseId}" (status ${remote.status}) before backing it up`,
        });
        return requeueAfter(ctx.pollIntervals.fastMs);
      }
      await write(run, {
        phase: "Running",
        reason: "BackingUp",
        databaseId,
        idempotencyKey: key,
        requestedAt: isoSeconds(run.now()),
        message: `Backup of database "${databaseId}" requested`,
      });
      notSent.add(requestKey);
      await ctx.crashPoint(backupCrashPoints.beforePost.name);
    }

    const requestedAt = run.obj.status?.requestedAt;
    if (requestedAt === undefined) throw new ReconcileError("ReconcileError", "backup status lost its requestedAt");
    if (run.obj.status?.backupId === undefined) {
      if (!notSent.has(requestKey)) {
        // A POST may have acted without us seeing its answer. The read also tells whether this server replays.
        const { onRequest } = await readOperationTarget(api, databaseId);
        if (!onRequest || run.now().getTime() - Date.parse(requestedAt) > replayWindowMs) {
          return finish(
            run,
            "Failed",
            "OutcomeUnknown",
            `The backup was requested at ${requestedAt} but its answer was lost and the service can no longer replay it; it is not requested again. List the database's backups, then create a new DatabaseBackup if needed`,
          );
        }
      }
      const stop = await post(run, remote, databaseId, requestKey);
      if (stop !== undefined) return stop;
    }

    const backupId = run.obj.status?.backupId;
    if (backupId === undefined) throw new ReconcileError("ReconcileError", "backup status lost its backupId");
    // Followed in the spec's database's list: a backup id written into status by anyone else is not found there.
    const backup = await findBackup(api, databaseId, backupId);
    if (backup.status === "running") return requeueAfter(ctx.pollIntervals.fastMs);
    if (backup.status === "completed") {
      forgetLatestBackup(databaseId);
      return finish(run, "Succeeded", "Available", `Backup "${backupId}" of database "${databaseId}" completed`, {
        ...(backup.size === undefined || backup.size === null ? {} : { sizeBytes: backup.size }),
        takenAt: isoSeconds(backup.createdAt),
      });
    }
    return finish(
      run,
      "Failed",
      "RemoteFailure",
      `The service reports backup "${backupId}" of database "${databaseId}" as ${backup.status}`,
    );
  }

  return {
    kind: "DatabaseBackup",
    type: DatabaseBackupType,
    parse: (raw) => parseOrTerminal(DatabaseBackup, "DatabaseBackup", raw) as BackupObject,
    finished: (obj) => obj.status?.phase !== undefined && terminalBackupPhases.includes(obj.status.phase),
    step,
  };
}

export function backupController(settings: BackupSettings = {}) {
  return oneShotController(
    {
      kind: "DatabaseBackup",
      type: DatabaseBackupType,
      crashPoints: Object.values(backupCrashPoints),
      stallingReasons: ["ReferenceNotAllowed", "OutcomeUnknown", "NotSupported", ...remoteDatabaseStallingReasons],
      // Backups are few and each waits on the service: two workers at most.
      workers: (concurrency) => Math.max(1, Math.min(concurrency, 2)),
      // A Database that gets its remote id, or becomes ready, wakes the backups still waiting in its namespace.
      wakeOn: [
        {
          kind: "Database",
          keys: (db, backups) =>
            backups
              .list(db.metadata.namespace ?? "")
              .filter((b) => {
                const phase = (b["status"] as { phase?: string } | undefined)?.phase;
                return b.metadata.namespace === db.metadata.namespace && (phase === undefined || phase === "Pending");
              })
              .map((b) => `${b.metadata.namespace ?? ""}/${b.metadata.name}`),
        },
      ],
    },
    (ctx: MdsControllerContext) => backupHandler(ctx, settings),
  );
}
