import type { MdsApi } from "../remote/remote-api.ts";
import { jsonEqual } from "../../operator/conditions.ts";
import { credentialStatusOf } from "../../operator/credentials.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { acceptedDatabaseId } from "../remote/accepted-database.ts";
import { parseOrTerminal, recurringController, resolveCredentials } from "../../operator/controller.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";
import type { OneShotRun, RecurringHandler } from "../../operator/one-shot-reconciler.ts";
import { readyCondition } from "../../operator/status.ts";
import { done, requeueAfter, type Outcome } from "../../operator/outcome.ts";
import { isoSeconds } from "../../operator/time.ts";
import { notSupportedMessage, readOperationTarget, Refused } from "../remote/operations.ts";
import { forgetLatestBackup } from "../remote/backups.ts";
import { CronError, latestSlot, nextSlot, parseCron } from "./cron.ts";
import { BackupSchedule, BackupScheduleType, type BackupScheduleStatus } from "./schema.ts";
import {
  createSlotBackup,
  deleteServiceBackup,
  deleteSlotBackup,
  slotBackupName,
  type ScheduleObject,
} from "./operation.ts";
import { ownedBackups, sealed, slotOf, toPrune, type Child } from "./retention.ts";

// A schedule composes with DatabaseBackup as a CronJob does with Jobs: at every slot it creates one DatabaseBackup,
// which takes that backup exactly once; retention deletes the oldest ones it took. What makes it safe:
// - a slot's DatabaseBackup has a deterministic name (<schedule>-<slot in unix minutes>) and idempotencyKey
//   (<schedule uid>/<slot>): after a crash, creating it again is refused by Kubernetes (AlreadyExists) and its POST
//   replays at the service. The DatabaseBackup is created before lastScheduleTime is written;
// - only the latest slot since the last one taken (or since the schedule was created) is taken: a downtime that
//   missed several slots takes one backup, not one per slot;
// - retention acts only on DatabaseBackups this schedule created: in its namespace, controlled by it (ownerReference
//   with its uid) and exactly as it creates them (the slot's name and idempotencyKey, both derived from its name, uid
//   and the slot), and only on a backup whose record the DatabaseBackup's loop sealed from the service's answer to
//   that DatabaseBackup's own request (status.backupSeal: a tag only a holder of the token computes, over the
//   DatabaseBackup's uid, the database and the backup). It deletes those backups at the service through the
//   schedule's own database and token
//   (DELETE /v1/databases/{the spec's database}/backups/{id}): the service answers 404 for a backup of any other
//   database or workspace, whatever a label, an ownerReference or a status says. A backup it did not take (the
//   service's daily ones, a DatabaseBackup of the user's) is never touched;
// - against a server that takes no backups on request (the public API, which announces no Idempotency-Key replay):
//   Ready=False, reason NotSupported (Stalled), nothing created, nothing requested, no further calls.

type Run = OneShotRun<ScheduleObject>;

/** A schedule's name leaves room for "-<unix minutes>" in its DatabaseBackups' names and fits a label value. */
const maxNameLength = 52;

/** What a server that takes no backups on request is told of (remote/operations.ts). */
const notSupportedWhat = {
  verbs: "take or delete",
  methods: "POST or DELETE",
  outcome: "nothing is scheduled",
  listed: "with spec.trackLatestBackup",
};

// eslint-disable-next-line max-lines-per-function -- closure factory: its step and helpers share the context
export function scheduleHandler(
  ctx: Pick<
    MdsControllerContext,
    "pool" | "defaultCredentials" | "cache" | "events" | "kube" | "pollIntervals" | "accepted"
  >,
): RecurringHandler<ScheduleObject> {
  /** Creates the slot's DatabaseBackup; an existing one of this schedule is the same slot (a restart, a lost answer). */
  async function createSlot(run: Run, slot: number): Promise<string> {
    const obj = run.obj;
    const name = slotBackupName(obj.metadata.name, slot);
    const result = await createSlotBackup(ctx.kube, obj, slot);
    if (result.created) {
      ctx.events.record(
        obj,
        "Normal",
        "BackupScheduled",
        `Created DatabaseBackup "${name}" for the slot ${isoSeconds(slot)}`,
      );
    } else if (result.existing !== undefined && ownedBackups([result.existing], obj).length === 0) {
      // Someone else's resource holds the name: not adopted (its backup is not this schedule's to delete).
      ctx.events.record(
        obj,
        "Warning",
        "SlotNameTaken",
        `DatabaseBackup "${name}" exists and is not this schedule's; the slot ${isoSeconds(slot)} is skipped`,
      );
    }
    return name;
  }

  /**
   * Deletes the pruned DatabaseBackups' backups at the service (through the spec's database and its token: a 404
   * there means gone, or never this database's) and then the resources. A 409 (a running or daily backup) keeps both.
   */
  async function prune(
    run: Run,
    remote: { api: MdsApi; seal: (message: string) => string },
    databaseId: string,
    children: Child[],
  ): Promise<number> {
    let removed = 0;
    for (const child of children) {
      const backupId = child.status?.backupId;
      if (backupId !== undefined && !sealed(child, databaseId, backupId, remote.seal)) {
        // Not provably the backup taken for this DatabaseBackup (written by hand, taken before seals, or sealed under
        // a token since replaced): neither it nor its record is deleted.
        ctx.events.record(
          run.obj,
          "Warning",
          "RetentionRefused",
          `DatabaseBackup "${child.metadata.name}" records backup "${backupId}" without a valid seal of its own request (status.backupSeal); neither is deleted. Delete them yourself if they are this schedule's`,
        );
        continue;
      }
      // A backup is deleted only as the spec's database's; a status naming another database is not acted on.
      if (backupId !== undefined && child.status?.databaseId === databaseId) {
        try {
          await deleteServiceBackup(remote.api, databaseId, backupId);
        } catch (err) {
          if (!(err instanceof Refused)) throw err;
          const message = `The service keeps backup "${backupId}": ${err.message}`;
          ctx.events.record(run.obj, "Warning", "RetentionRefused", message);
          continue;
        }
      }
      await deleteSlotBackup(ctx.kube, child);
      removed++;
    }
    if (removed > 0) {
      forgetLatestBackup(databaseId);
      ctx.events.record(
        run.obj,
        "Normal",
        "BackupsPruned",
        `Deleted ${removed} backup(s) past keep=${run.obj.spec.keep}`,
      );
    }
    return removed;
  }

  // eslint-disable-next-line max-lines-per-function -- a slot's steps in the order that takes each slot once and prunes only what the schedule owns: split, that order would be scattered
  async function step(run: Run): Promise<Outcome> {
    const obj = run.obj;
    const ns = obj.metadata.namespace ?? "default";
    if (obj.metadata.name.length > maxNameLength)
      throw new TerminalError(
        "InvalidSpec",
        `a BackupSchedule's name is at most ${maxNameLength} characters (its DatabaseBackups are named <name>-<slot>)`,
      );
    let cron;
    try {
      cron = parseCron(obj.spec.schedule);
    } catch (err) {
      if (err instanceof CronError)
        throw new TerminalError("InvalidSpec", `invalid spec.schedule "${obj.spec.schedule}": ${err.message}`);
      throw err;
    }
    const db = ctx.cache("Database").get(ns, obj.spec.databaseRef.name);
    // The database comes from the spec's Database, by the id its own loop accepted (accepted.ts); never from a status.
    const databaseId = acceptedDatabaseId(ctx.accepted, db, { namespace: ns, name: obj.spec.databaseRef.name });
    const s: BackupScheduleStatus = obj.status ?? {};
    const lastReady = s.conditions?.find((c) => c.type === "Ready");
    if (
      lastReady?.reason === "NotSupported" &&
      lastReady.observedGeneration === obj.metadata.generation &&
      s.databaseId === databaseId
    )
      return done(); // Nothing more to ask a server that takes no backups on request, until the spec changes.

    const remote = await resolveCredentials(
      ctx,
      ns,
      (db?.["spec"] ?? {}) as { credentials?: { secretRef: { name: string; key?: string } } },
    );
    const { api, use } = remote;
    if (!jsonEqual(s.credentials, credentialStatusOf(use)))
      await run.writeStatus({ credentials: credentialStatusOf(use) });

    const now = run.now().getTime();
    const owned = ownedBackups(ctx.cache("DatabaseBackup").list(ns), obj);
    const lastTaken = Math.max(Date.parse(s.lastScheduleTime ?? "") || 0, ...owned.map(slotOf));
    const since = Math.max(lastTaken, Date.parse(obj.metadata.creationTimestamp ?? "") || now);
    const due = obj.spec.suspend === true ? undefined : latestSlot(cron, since, now);

    if (s.nextScheduleTime === undefined || due !== undefined || s.databaseId !== databaseId) {
      // The read tells whether this server takes backups on request (it announces Idempotency-Key replay).
      const { database: remote, onRequest } = await readOperationTarget(api, databaseId);
      if (!onRequest) {
        const message = notSupportedMessage(databaseId, notSupportedWhat);
        await run.writeStatus(
          { databaseId, message, nextScheduleTime: undefined },
          readyCondition(false, "NotSupported", message),
        );
        ctx.events.record(obj, "Warning", "NotSupported", message);
        return done();
      }
      if (due !== undefined && remote.status !== "ready") {
        throw new WaitingError(
          "DatabaseNotReady",
          `database "${databaseId}" is ${remote.status}; the slot ${isoSeconds(due)} is taken once it is ready`,
        );
      }
    }

    let lastBackup = s.lastBackup;
    let lastScheduleTime = s.lastScheduleTime;
    if (due !== undefined) {
      lastBackup = await createSlot(run, due);
      lastScheduleTime = isoSeconds(due);
    } else if (lastTaken > 0) {
      lastScheduleTime = isoSeconds(lastTaken);
    }

    const { prune: old, kept } = toPrune(owned, obj.spec.keep);
    if (old.length > 0) await prune(run, remote, databaseId, old);

    const next = nextSlot(cron, Math.max(now, due ?? 0));
    const message =
      obj.spec.suspend === true
        ? "Suspended: no new backups are taken"
        : next === undefined
          ? `The schedule "${obj.spec.schedule}" has no slot in the next five years`
          : `Next backup at ${isoSeconds(next)}`;
    await run.writeStatus(
      {
        databaseId,
        lastScheduleTime,
        lastBackup,
        nextScheduleTime: next === undefined || obj.spec.suspend === true ? undefined : isoSeconds(next),
        kept,
        message,
      },
      readyCondition(true, obj.spec.suspend === true ? "Suspended" : "Scheduled", message),
    );
    // Woken at the next slot (and by its DatabaseBackups' changes); at most an hour apart, to notice a clock jump.
    return requeueAfter(Math.min(Math.max((next ?? now + 3600_000) - now, 1_000), 3600_000));
  }

  return {
    kind: "BackupSchedule",
    type: BackupScheduleType,
    parse: (raw) => parseOrTerminal(BackupSchedule, "BackupSchedule", raw) as ScheduleObject,
    step,
  };
}

// A schedule never ends: the recurring loop (the one-shot loop's status writing, conditions and errors, no final phase).
export function scheduleController() {
  return recurringController(
    {
      kind: "BackupSchedule",
      type: BackupScheduleType,
      stallingReasons: ["ReferenceNotAllowed", "NotSupported"],
      workers: (concurrency) => Math.max(1, Math.min(concurrency, 2)),
      wakeOn: [
        {
          // A slot's DatabaseBackup that changes (completes: retention may prune) wakes its schedule.
          kind: "DatabaseBackup",
          keys: (backup) =>
            (backup.metadata.ownerReferences ?? [])
              .filter((r) => r.kind === "BackupSchedule" && r.controller === true)
              .map((r) => `${backup.metadata.namespace ?? ""}/${r.name}`),
        },
        {
          // A Database that gets its remote id wakes the schedules that wait for it.
          kind: "Database",
          keys: (db, schedules) =>
            schedules
              .list(db.metadata.namespace ?? "")
              .filter(
                (s) =>
                  s.metadata.namespace === db.metadata.namespace &&
                  (s["spec"] as { databaseRef?: { name?: string } } | undefined)?.databaseRef?.name ===
                    db.metadata.name,
              )
              .map((s) => `${s.metadata.namespace ?? ""}/${s.metadata.name}`),
        },
      ],
    },
    (ctx: MdsControllerContext) => scheduleHandler(ctx),
  );
}
