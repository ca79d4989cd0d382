import type { Logger } from "pino";
import type { KubeClient } from "../../kube/client.ts";
import { isKubeConflict } from "../../kube/errors.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { errorCode, mayHaveLanded } from "../../operator/api.ts";
import { annotations, labels, restoreKeysOf } from "../../operator/connection-secret.ts";
import { setCondition } from "../../operator/conditions.ts";
import type { CredentialPool } from "../../operator/credentials.ts";
import { ReconcileError, classifyError, messageOf } from "../../operator/errors.ts";
import type { EventRecorder } from "../../operator/events.ts";
import { done, failed, requeueAfter, type Outcome } from "../../operator/outcome.ts";
import { splitKey } from "../../operator/managed-reconciler.ts";
import { credentialsRefOf, parseOrTerminal, remoteIdOf } from "../database/controller.ts";
import { restoreLedgerLimit, type Database, type RestoreLedgerEntry } from "../database/schema.ts";
import { DatabaseRestoreType, DatabaseType } from "../types.ts";
import { resolveBackup, startRestore } from "./external.ts";
import { DatabaseRestore, terminalRestorePhases, type DatabaseRestoreStatus } from "./schema.ts";

// A restore destroys data and GitOps re-applies manifests, so it runs at most once per idempotencyKey and target:
// - the key is looked up in the target's ledger (Database status and its connection Secret, which outlives it);
// - requestedAt (and the target's source) is written before the POST. A POST whose outcome is unknown (a crash, a
//   lost answer) is sent again only to a server that announced Idempotency-Key replay, within its window. Any other
//   server (the public API ignores the key) is not asked twice: the target is observed instead (recovering, or its
//   source changed to the requested backup: it ran), else the phase is Failed with reason OutcomeUnknown.

export interface RestoreDeps {
  kube: KubeClient;
  databases: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };
  pool: CredentialPool;
  defaultCredentials: { secretNamespace: string; secretName: string; key: string };
  events: EventRecorder;
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  crashPoint: (name: string) => void | Promise<void>;
  /** How long the service replays a POST with the same Idempotency-Key (24 h; kept below it). */
  replayWindowMs?: number;
  now?: () => Date;
}

type RestoreObject = DatabaseRestore & { metadata: { name: string; namespace?: string | undefined } };

const iso = (d: Date) => d.toISOString().replace(/\.\d+Z$/, "Z");

export function createRestoreReconciler(deps: RestoreDeps) {
  const now = deps.now ?? (() => new Date());
  const replayWindowMs = deps.replayWindowMs ?? 23 * 3600_000;
  // Keys whose POST the service has acknowledged in this process; after a restart one replay-safe re-POST confirms.
  const acknowledged = new Set<string>();
  // Keys with no POST that may have acted: requested in this process and every POST so far refused (a 4xx).
  const notSent = new Set<string>();

  async function writeStatus(obj: RestoreObject, fields: Partial<DatabaseRestoreStatus>): Promise<RestoreObject> {
    const next: DatabaseRestoreStatus = { ...(obj.status ?? {}), ...fields };
    const phase = next.phase ?? "Pending";
    const ok = phase === "Succeeded" || phase === "Skipped";
    next.conditions = setCondition(
      next.conditions,
      {
        type: "Ready",
        status: ok ? "True" : "False",
        reason: ok ? "Available" : (fields.reason as never) ?? (phase === "Failed" ? "RemoteFailure" : phase === "Running" ? "Restoring" : "DatabaseNotReady"),
        message: next.message ?? "",
        observedGeneration: obj.metadata.generation,
      },
      now(),
    );
    if (obj.metadata.generation !== undefined) next.observedGeneration = obj.metadata.generation;
    if (JSON.stringify(next) === JSON.stringify(obj.status ?? {})) return obj;
    return deps.kube.patchStatus<RestoreObject>(DatabaseRestoreType, obj.metadata.namespace, obj.metadata.name, {
      metadata: { resourceVersion: obj.metadata.resourceVersion },
      status: next,
    });
  }

  function targetSecret(ns: string, targetDb: KubeObject | undefined, targetId: string): Secret | undefined {
    const status = targetDb?.["status"] as { secretName?: string } | undefined;
    const spec = targetDb?.["spec"] as { connectionSecret?: { name?: string } } | undefined;
    const name = status?.secretName ?? spec?.connectionSecret?.name ?? targetDb?.metadata.name;
    const byName = name === undefined ? undefined : deps.secrets.get(ns, name);
    if (byName?.metadata.labels?.[labels.databaseId] === targetId) return byName;
    return deps.secrets.list(ns).find((s) => s.metadata.labels?.[labels.databaseId] === targetId);
  }

  /** Records the key on the target's ledger: Database status (bounded) and the connection Secret's annotation. */
  async function recordLedger(ns: string, targetName: string | undefined, targetId: string, entry: RestoreLedgerEntry) {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        if (targetName !== undefined) {
          const db = await deps.kube.get<KubeObject>(DatabaseType, ns, targetName);
          if (db !== undefined && remoteIdOf(db) === targetId) {
            const status = (db["status"] ?? {}) as Database["status"] & object;
            const ledger = (status.restoreLedger ?? []).filter((e) => e.key !== entry.key);
            ledger.push(entry);
            await deps.kube.patchStatus(DatabaseType, ns, targetName, {
              metadata: { resourceVersion: db.metadata.resourceVersion },
              status: { restoreLedger: ledger.slice(-restoreLedgerLimit) },
            });
          }
        }
        const secret = targetSecret(ns, targetName === undefined ? undefined : deps.databases.get(ns, targetName), targetId);
        if (secret !== undefined) {
          const live = await deps.kube.get<Secret>(SecretType, ns, secret.metadata.name);
          const keys = restoreKeysOf(live);
          if (live !== undefined && !keys.includes(entry.key)) {
            await deps.kube.patch(SecretType, ns, secret.metadata.name, {
              metadata: { resourceVersion: live.metadata.resourceVersion, annotations: { [annotations.restores]: JSON.stringify([...keys, entry.key].slice(-100)) } },
            });
          }
        }
        return;
      } catch (err) {
        if (!isKubeConflict(err) || attempt === 4) throw err;
      }
    }
  }

  function ledgerHas(ns: string, targetDb: KubeObject | undefined, targetId: string, key: string): boolean {
    const status = targetDb?.["status"] as { restoreLedger?: RestoreLedgerEntry[] } | undefined;
    if (remoteIdOf(targetDb) === targetId && (status?.restoreLedger ?? []).some((e) => e.key === key)) return true;
    return restoreKeysOf(targetSecret(ns, targetDb, targetId)).includes(key);
  }

  return async function reconcileRestore(key: string): Promise<Outcome> {
    const [namespace, name] = splitKey(key);
    const ns = namespace ?? "default";
    const log = deps.logger.child({ namespace, name });
    // A live read, never the cache: acting on a stale phase could restore twice.
    const raw = await deps.kube.get<KubeObject>(DatabaseRestoreType, namespace, name);
    if (raw === undefined) return done();
    let obj: RestoreObject;
    try {
      obj = parseOrTerminal(DatabaseRestore, "DatabaseRestore", raw) as RestoreObject;
    } catch (err) {
      deps.events.record(raw, "Warning", "InvalidSpec", messageOf(err));
      return failed(err);
    }
    const status = obj.status ?? {};
    if (status.phase !== undefined && terminalRestorePhases.includes(status.phase)) return done();
    const restoreKey = obj.spec.idempotencyKey ?? `${ns}/${obj.metadata.name}`;
    try {
      const targetName = obj.spec.target.databaseRef?.name;
      const targetDb = targetName === undefined ? undefined : deps.databases.get(ns, targetName);
      const targetId = status.targetDatabaseId ?? obj.spec.target.databaseId ?? remoteIdOf(targetDb);
      if (targetId === undefined) {
        throw new ReconcileError("DatabaseNotReady", targetDb === undefined ? `target database "${targetName}" not found` : `target database "${targetName}" has no remote id yet`);
      }
      const credentialsOwner = (targetDb ?? obj) as never;
      const ctx = await deps.pool.resolve(credentialsRefOf({ metadata: { namespace: ns }, spec: (credentialsOwner as { spec?: { credentials?: never } }).spec ?? {} }, deps));

      if (status.requestedAt === undefined) {
        if (ledgerHas(ns, targetDb, targetId, restoreKey)) {
          obj = await writeStatus(obj, {
            phase: "Skipped",
            reason: "ReconcileSuccess",
            idempotencyKey: restoreKey,
            targetDatabaseId: targetId,
            message: `A restore with idempotencyKey "${restoreKey}" was already applied to database "${targetId}"; use a new key to restore again`,
            completedAt: iso(now()),
          });
          deps.events.record(obj, "Normal", "Skipped", `Restore "${restoreKey}" already applied to database "${targetId}"`);
          return done();
        }
        if (status.backupId === undefined) {
          const sourceName = obj.spec.source.databaseRef?.name;
          const sourceId = obj.spec.source.databaseId ?? remoteIdOf(sourceName === undefined ? undefined : deps.databases.get(ns, sourceName));
          if (sourceId === undefined) throw new ReconcileError("DatabaseNotReady", `source database "${sourceName}" not found or has no remote id yet`);
          const backupId = await resolveBackup(ctx.api, sourceId, obj.spec.source.backupId);
          // `latest` resolves once: recorded before anything else happens.
          obj = await writeStatus(obj, {
            phase: "Pending",
            idempotencyKey: restoreKey,
            targetDatabaseId: targetId,
            sourceDatabaseId: sourceId,
            backupId,
            message: `Restoring backup "${backupId}" into database "${targetId}"`,
          });
        }
        const db = await ctx.api.getDatabase(targetId);
        if (db.status === "provisioning" || db.status === "recovering") {
          obj = await writeStatus(obj, { phase: "Pending", message: `Waiting for database "${targetId}" (status ${db.status}) before restoring` });
          return requeueAfter(deps.pollIntervals.fastMs);
        }
        const requestedAt = iso(now());
        obj = await writeStatus(obj, {
          phase: "Running",
          requestedAt,
          targetSourceBefore: sourceKeyOf(db.source),
          reason: "Restoring",
          message: `Restore of backup "${obj.status?.backupId}" requested`,
        });
        notSent.add(`${targetId}|${restoreKey}`);
        await recordLedger(ns, targetName, targetId, {
          key: restoreKey,
          phase: "Running",
          requestedAt,
          restore: obj.metadata.name,
          ...(obj.status?.backupId === undefined ? {} : { backupId: obj.status.backupId }),
          ...(obj.status?.sourceDatabaseId === undefined ? {} : { sourceDatabaseId: obj.status.sourceDatabaseId }),
        });
        await deps.crashPoint("restore:before-post");
      }
      const s = obj.status ?? {};
      const backupId = s.backupId;
      const sourceId = s.sourceDatabaseId;
      if (backupId === undefined || sourceId === undefined || s.requestedAt === undefined) {
        throw new ReconcileError("ReconcileError", "restore status lost its resolved backup; refusing to guess");
      }
      const ackKey = `${targetId}|${restoreKey}`;
      if (!acknowledged.has(ackKey) && !notSent.has(ackKey)) {
        // A POST may have acted without us seeing its answer. The read also tells whether this server replays.
        const target = await ctx.api.getDatabase(targetId);
        if (!ctx.api.replaysIdempotencyKeys()) {
          const requested = sourceKeyOf({ type: "backup", databaseId: sourceId, backupId });
          if (target.status === "recovering" || (sourceKeyOf(target.source) === requested && s.targetSourceBefore !== requested)) {
            acknowledged.add(ackKey);
          } else {
            return finish(
              obj,
              ns,
              targetName,
              targetId,
              restoreKey,
              "Failed",
              "OutcomeUnknown",
              `The restore was requested at ${s.requestedAt} but its answer was lost, the service does not replay requests and database "${targetId}" shows no sign of it; it is not repeated. Check the database's data, then create a new DatabaseRestore if needed`,
            );
          }
        } else if (now().getTime() - Date.parse(s.requestedAt) > replayWindowMs) {
          return finish(obj, ns, targetName, targetId, restoreKey, "Failed", "OutcomeUnknown", `The restore was requested at ${s.requestedAt} and its outcome cannot be known any more; it is not repeated. Check the database's data, then create a new DatabaseRestore if needed`);
        }
      }
      if (!acknowledged.has(ackKey)) {
        try {
          await startRestore(ctx.api, targetId, sourceId, backupId, restoreKey);
        } catch (err) {
          if (mayHaveLanded(err)) notSent.delete(ackKey);
          const code = errorCode(err);
          if (code === "unprocessable" || code === "invalid_request" || code === "not_found") {
            notSent.delete(ackKey);
            return finish(obj, ns, targetName, targetId, restoreKey, "Failed", "RemoteFailure", `The service refused the restore: ${messageOf(err)}`);
          }
          throw err;
        }
        notSent.delete(ackKey);
        acknowledged.add(ackKey);
        await deps.crashPoint("restore:after-post");
        log.info({ targetId, backupId }, "Requested restore");
        deps.events.record(obj, "Normal", "RestoreStarted", `Restoring backup "${backupId}" into database "${targetId}"`);
      }
      const db = await ctx.api.getDatabase(targetId);
      ctx.mirror.putDatabase(db);
      if (db.status === "recovering" || db.status === "provisioning") return requeueAfter(deps.pollIntervals.fastMs);
      acknowledged.delete(ackKey);
      if (db.status === "failure") {
        return finish(obj, ns, targetName, targetId, restoreKey, "Failed", "RemoteFailure", `The service reports the restore failed; database "${targetId}" keeps its previous data`);
      }
      return finish(obj, ns, targetName, targetId, restoreKey, "Succeeded", "Available", `Restored backup "${backupId}" into database "${targetId}"`);
    } catch (err) {
      const c = classifyError(err);
      if (!c.conflict) {
        log.debug({ err }, "Could not reconcile DatabaseRestore");
        deps.events.record(obj, "Warning", c.reason, messageOf(err));
        try {
          await writeStatus(obj, { phase: obj.status?.phase ?? "Pending", message: messageOf(err), reason: c.reason });
        } catch {
          // reported through the event; the retry will write status
        }
      }
      return failed(err);
    }
  };

  /** A database's source as one comparable string. */
  function sourceKeyOf(source: { type: string; databaseId?: string; backupId?: string } | null): string {
    if (source === null) return "none";
    return [source.type, source.databaseId ?? "", source.backupId ?? ""].join(":");
  }

  async function finish(obj: RestoreObject, ns: string, targetName: string | undefined, targetId: string, key: string, phase: "Succeeded" | "Failed", reason: string, message: string): Promise<Outcome> {
    const completedAt = iso(now());
    await recordLedger(ns, targetName, targetId, {
      key,
      phase,
      completedAt,
      restore: obj.metadata.name,
      ...(obj.status?.requestedAt === undefined ? {} : { requestedAt: obj.status.requestedAt }),
      ...(obj.status?.backupId === undefined ? {} : { backupId: obj.status.backupId }),
      ...(obj.status?.sourceDatabaseId === undefined ? {} : { sourceDatabaseId: obj.status.sourceDatabaseId }),
    });
    const written = await writeStatus(obj, { phase, reason, message, completedAt });
    deps.events.record(written, phase === "Succeeded" ? "Normal" : "Warning", phase === "Succeeded" ? "RestoreSucceeded" : reason, message);
    deps.logger.info({ namespace: ns, name: obj.metadata.name, phase, reason }, "Restore finished");
    return done();
  }
}
