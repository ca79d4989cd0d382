import { timingSafeEqual } from "node:crypto";
import { isKubeNotFound, KubeAlreadyExistsError } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/types.ts";
import { errorCode, isApiNotFound } from "../../operator/api.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { jsonEqual } from "../../operator/conditions.ts";
import { credentialStatusOf } from "../../operator/credentials.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { acceptedDatabaseId } from "../remote/accepted-database.ts";
import { oneShotController, parseOrTerminal, resolveCredentials } from "../../operator/controller.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";
import type { OneShotHandler, OneShotRun } from "../../operator/one-shot-reconciler.ts";
import { done, requeueAfter, type Outcome } from "../../operator/outcome.ts";
import type { ConditionUpdate } from "../../operator/status.ts";
import { forgetLatestBackup } from "../database-backup/latest.ts";
import { backupSealMessage } from "../database-backup/controller.ts";
import { DatabaseBackupType } from "../database-backup/schema.ts";
import { apiVersion } from "../group.ts";
import { CronError, latestSlot, nextSlot, parseCron } from "./cron.ts";
import { BackupSchedule, BackupScheduleType, type BackupScheduleStatus } from "./schema.ts";

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

type ScheduleObject = BackupSchedule & { metadata: { name: string; namespace?: string | undefined } };
type Run = OneShotRun<ScheduleObject>;

/** The annotation on a slot's DatabaseBackup: the slot it was created for. */
const scheduledAtAnnotation = "mds.dev/scheduled-at";
/** The label on a slot's DatabaseBackup (`kubectl get databasebackups -l mds.dev/backup-schedule=<name>`). */
const scheduleLabel = "mds.dev/backup-schedule";
/** A schedule's name leaves room for "-<unix minutes>" in its DatabaseBackups' names and fits a label value. */
const maxNameLength = 52;

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
const slotMinutes = (slot: number) => Math.floor(slot / 60_000);

/** The DatabaseBackup of a slot: named and keyed by the slot, so its creation and its POST are idempotent. */
export function slotBackupName(schedule: string, slot: number): string {
  return `${schedule}-${slotMinutes(slot)}`;
}

type Child = KubeObject & {
  spec?: { idempotencyKey?: string } | undefined;
  status?: { phase?: string; backupId?: string; databaseId?: string; backupSeal?: string } | undefined;
};

/** The idempotencyKey of a slot's DatabaseBackup: one backup per schedule (uid) and slot. */
const slotKey = (uid: string, slot: number) => `${uid}/${slotMinutes(slot)}`;

/**
 * The DatabaseBackups this schedule created, checked both ways: each names the schedule as its controller (an
 * ownerReference with the schedule's uid, in its namespace), and is what the schedule creates for its slot (the
 * name and idempotencyKey the schedule derives from its own name and uid and that slot). Anyone may create a
 * DatabaseBackup with such an ownerReference; one made otherwise is not the schedule's.
 */
function ownedBackups(all: KubeObject[], schedule: ScheduleObject): Child[] {
  const ns = schedule.metadata.namespace;
  const uid = schedule.metadata.uid;
  if (uid === undefined) return [];
  return (all as Child[]).filter((b) => {
    const slot = Date.parse(b.metadata.annotations?.[scheduledAtAnnotation] ?? "");
    return (
      b.metadata.namespace === ns &&
      (b.metadata.ownerReferences ?? []).some(
        (r) => r.uid === uid && r.kind === "BackupSchedule" && r.controller === true,
      ) &&
      !Number.isNaN(slot) &&
      b.metadata.name === slotBackupName(schedule.metadata.name, slot) &&
      b.spec?.idempotencyKey === slotKey(uid, slot)
    );
  });
}

/** Whether `child`'s record of its backup is the one its own loop sealed from the service's answer. */
function sealed(child: Child, databaseId: string, backupId: string, seal: (message: string) => string): boolean {
  const uid = child.metadata.uid;
  const recorded = child.status?.backupSeal;
  if (uid === undefined || recorded === undefined) return false;
  const expected = Buffer.from(seal(backupSealMessage(uid, databaseId, backupId)));
  const given = Buffer.from(recorded);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

const slotOf = (b: KubeObject) => {
  const t = Date.parse(b.metadata.annotations?.[scheduledAtAnnotation] ?? "");
  return Number.isNaN(t) ? Date.parse(b.metadata.creationTimestamp ?? "") || 0 : t;
};

/**
 * What retention removes: past the newest `keep` Succeeded ones, every older Succeeded one, and every Failed one
 * older than the newest Succeeded one (superseded). Pending and Running ones are never removed.
 */
function toPrune(owned: Child[], keep: number): { prune: Child[]; kept: number } {
  const newestFirst = [...owned].sort((a, b) => slotOf(b) - slotOf(a));
  const succeeded = newestFirst.filter((b) => b.status?.phase === "Succeeded");
  const newestOk = succeeded[0] === undefined ? undefined : slotOf(succeeded[0]);
  const prune = [
    ...succeeded.slice(keep),
    ...newestFirst.filter((b) => b.status?.phase === "Failed" && newestOk !== undefined && slotOf(b) < newestOk),
  ];
  return { prune, kept: Math.min(succeeded.length, keep) };
}

const notSupportedMessage = (databaseId: string) =>
  `the service does not take or delete backups on request (no POST or DELETE /v1/databases/${databaseId}/backups, as in the public API, whose provider takes backups itself); nothing is scheduled. Its backups are listed in the Database's status.latestBackup with spec.trackLatestBackup`;

// eslint-disable-next-line max-lines-per-function -- closure factory: its step and helpers share the context
export function scheduleHandler(
  ctx: Pick<
    MdsControllerContext,
    "pool" | "defaultCredentials" | "cache" | "events" | "kube" | "pollIntervals" | "accepted"
  >,
): OneShotHandler<ScheduleObject> {
  const ready = (status: "True" | "False", reason: string, message: string): ConditionUpdate => ({
    type: "Ready",
    status,
    reason,
    message,
  });

  /** Creates the slot's DatabaseBackup; an existing one of this schedule is the same slot (a restart, a lost answer). */
  async function createSlot(run: Run, slot: number): Promise<string> {
    const obj = run.obj;
    const name = slotBackupName(obj.metadata.name, slot);
    const ns = obj.metadata.namespace ?? "default";
    try {
      await ctx.kube.create(DatabaseBackupType, {
        apiVersion,
        kind: "DatabaseBackup",
        metadata: {
          name,
          namespace: ns,
          labels: { [scheduleLabel]: obj.metadata.name },
          annotations: { [scheduledAtAnnotation]: iso(slot) },
          ownerReferences: [
            {
              apiVersion,
              kind: "BackupSchedule",
              name: obj.metadata.name,
              uid: obj.metadata.uid ?? "",
              controller: true,
              blockOwnerDeletion: false,
            },
          ],
        },
        spec: {
          databaseRef: { name: obj.spec.databaseRef.name },
          idempotencyKey: slotKey(obj.metadata.uid ?? "", slot),
        },
      });
      ctx.events.record(obj, "Normal", "BackupScheduled", `Created DatabaseBackup "${name}" for the slot ${iso(slot)}`);
    } catch (err) {
      if (!(err instanceof KubeAlreadyExistsError)) throw err;
      const existing = await ctx.kube.get<KubeObject>(DatabaseBackupType, ns, name);
      if (existing !== undefined && ownedBackups([existing], obj).length === 0) {
        // Someone else's resource holds the name: not adopted (its backup is not this schedule's to delete).
        ctx.events.record(
          obj,
          "Warning",
          "SlotNameTaken",
          `DatabaseBackup "${name}" exists and is not this schedule's; the slot ${iso(slot)} is skipped`,
        );
      }
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
    const api = remote.api;
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
          await api.deleteBackup(databaseId, backupId);
        } catch (err) {
          if (errorCode(err) === "conflict") {
            ctx.events.record(
              run.obj,
              "Warning",
              "RetentionRefused",
              `The service keeps backup "${backupId}": ${(err as Error).message}`,
            );
            continue;
          }
          if (!isApiNotFound(err)) throw err;
        }
      }
      try {
        await ctx.kube.delete(DatabaseBackupType, child.metadata.namespace, child.metadata.name, {
          ...(child.metadata.uid === undefined ? {} : { uid: child.metadata.uid }),
        });
      } catch (err) {
        if (!isKubeNotFound(err)) throw err;
      }
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
    const readyCondition = s.conditions?.find((c) => c.type === "Ready");
    if (
      readyCondition?.reason === "NotSupported" &&
      readyCondition.observedGeneration === obj.metadata.generation &&
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
      const remote = await api.getDatabase(databaseId);
      if (!api.replaysIdempotencyKeys()) {
        await run.writeStatus(
          { databaseId, message: notSupportedMessage(databaseId), nextScheduleTime: undefined },
          ready("False", "NotSupported", notSupportedMessage(databaseId)),
        );
        ctx.events.record(obj, "Warning", "NotSupported", notSupportedMessage(databaseId));
        return done();
      }
      if (due !== undefined && remote.status !== "ready") {
        throw new WaitingError(
          "DatabaseNotReady",
          `database "${databaseId}" is ${remote.status}; the slot ${iso(due)} is taken once it is ready`,
        );
      }
    }

    let lastBackup = s.lastBackup;
    let lastScheduleTime = s.lastScheduleTime;
    if (due !== undefined) {
      lastBackup = await createSlot(run, due);
      lastScheduleTime = iso(due);
    } else if (lastTaken > 0) {
      lastScheduleTime = iso(lastTaken);
    }

    const { prune: old, kept } = toPrune(owned, obj.spec.keep);
    if (old.length > 0) await prune(run, remote, databaseId, old);

    const next = nextSlot(cron, Math.max(now, due ?? 0));
    const message =
      obj.spec.suspend === true
        ? "Suspended: no new backups are taken"
        : next === undefined
          ? `The schedule "${obj.spec.schedule}" has no slot in the next five years`
          : `Next backup at ${iso(next)}`;
    await run.writeStatus(
      {
        databaseId,
        lastScheduleTime,
        lastBackup,
        nextScheduleTime: next === undefined || obj.spec.suspend === true ? undefined : iso(next),
        kept,
        message,
      },
      ready("True", obj.spec.suspend === true ? "Suspended" : "Scheduled", message),
    );
    // Woken at the next slot (and by its DatabaseBackups' changes); at most an hour apart, to notice a clock jump.
    return requeueAfter(Math.min(Math.max((next ?? now + 3600_000) - now, 1_000), 3600_000));
  }

  return {
    kind: "BackupSchedule",
    type: BackupScheduleType,
    parse: (raw) => parseOrTerminal(BackupSchedule, "BackupSchedule", raw) as ScheduleObject,
    // A schedule never ends: the one-shot loop's status writing, conditions and errors, with no final phase.
    finished: () => false,
    step,
  };
}

export function scheduleController() {
  return oneShotController(
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
