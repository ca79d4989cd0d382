import { createHmac } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import { tenantLimitsOf } from "../config/config.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { serverPool } from "../runtime/deps.ts";
import { cloneInto } from "./clone.ts";
import { reserveBeforeDump } from "../domain/backups.ts";
import { privateDirectory } from "./dump.ts";
import { jobLoginsOf } from "./job-login.ts";
import { JobFatalError, type Job, type JobHandler, type JobKind } from "../queue/jobs.ts";
import {
  allowConnections,
  createDatabase,
  databaseComment,
  dropDatabase,
  dropDatabaseIfExists,
  provisionDatabase,
  revokeLoginRole,
  swapDatabases,
} from "../placement/provisioner.ts";
import { isNoSpace } from "../shared/errors.ts";
import { inTransaction } from "../store/pool.ts";
import { getDatabaseById } from "../store/queries.ts";
import { archiveKey, dumpAsOwner, restoreAsOwner, usableBackup } from "./owner-dump.ts";

// The durable work behind the API: every step can be repeated after a crash, and a job that gives up leaves a
// clean state (status `failure`, old data in place, no scratch database).

function backupFile(deps: ServiceDeps, databaseId: string, backupId: string): string {
  return path.join(deps.config.backupDir, databaseId, `${backupId}.dump`);
}

async function loadDatabase(deps: ServiceDeps, job: Job) {
  const db = await getDatabaseById(deps.pool, job.target_id);
  if (!db) throw new JobFatalError(`database ${job.target_id} does not exist`);
  return db;
}

const provision: (deps: ServiceDeps) => JobHandler = (deps) => ({
  async run(job, ctx) {
    const db = await loadDatabase(deps, job);
    if (db.deleted_at || db.status !== "provisioning") {
      await ctx.outcome("skipped");
      return;
    }
    const pool = serverPool(deps, db);
    const { rows: logins } = await deps.pool.query<{ roleName: string; verifier: string }>(
      `SELECT role_name AS "roleName", verifier FROM connections WHERE database_id = $1 AND revoked_at IS NULL`,
      [db.id],
    );
    const fromBackup = db.source.type === "backup" ? await usableBackup(deps, db.source.backupId) : undefined;
    // A restore (or clone) interrupted by a crash leaves a half-filled database that nobody can see yet: start over.
    if ((fromBackup || db.source.type === "database") && ctx.attempt > 1) await dropDatabaseIfExists(pool, db.pg_name);
    await provisionDatabase(pool, {
      pgName: db.pg_name,
      ownerRole: db.owner_role,
      logins,
      limits: tenantLimitsOf(deps.config, db.region),
    });
    ctx.signal.throwIfAborted();
    if (fromBackup)
      await restoreAsOwner(deps, {
        jobId: job.id,
        at: db,
        pgName: db.pg_name,
        ownerRole: db.owner_role,
        backup: fromBackup,
        signal: ctx.signal,
      });
    if (db.source.type === "database") await cloneInto(deps, db, db.source.databaseId, job, ctx.signal);
    await inTransaction(deps.pool, async (client) => {
      // Serialised with connection mint/revoke, which lock the same row.
      await client.query("SELECT 1 FROM databases WHERE id = $1 FOR UPDATE", [db.id]);
      const { rows: revoked } = await client.query<{ role_name: string }>(
        "SELECT role_name FROM connections WHERE database_id = $1 AND revoked_at IS NOT NULL",
        [db.id],
      );
      for (const r of revoked) await revokeLoginRole(pool, r.role_name);
      await client.query("UPDATE databases SET status = 'ready' WHERE id = $1 AND status = 'provisioning'", [db.id]);
    });
    await ctx.outcome("provisioned");
  },
  async fail(job, err) {
    await dropJobLogins(deps, job);
    // A restore or clone that failed on the way (an archive refused mid-stream) leaves a half-filled database: nobody
    // may connect to it or back it up as if it were data. Dropped before the status says `failure`, so a reader that
    // sees the failure never finds it (the other order was a race a loaded test run hit). Its row stays, with the
    // reason; deleting it is as usual.
    const db = await getDatabaseById(deps.pool, job.target_id);
    if (db?.status === "provisioning" && db.source.type !== "empty")
      await dropDatabaseIfExists(serverPool(deps, db), db.pg_name).catch(() => {});
    await deps.pool.query(
      "UPDATE databases SET status = 'failure', failure_reason = $2 WHERE id = $1 AND status = 'provisioning'",
      [job.target_id, err.message.slice(0, 500)],
    );
  },
});

/** A worker killed mid-job leaves its login behind (its password died with it); a job given up drops it. */
async function dropJobLogins(deps: ServiceDeps, job: Job): Promise<void> {
  const db = await getDatabaseById(deps.pool, job.target_id);
  if (!db) return;
  // A clone's dump logins live on its source's server, which may be another.
  const source = db.source.type === "database" ? await getDatabaseById(deps.pool, db.source.databaseId) : undefined;
  for (const at of source ? [db, source] : [db]) {
    try {
      const pool = serverPool(deps, at);
      for (const login of await jobLoginsOf(pool, job.id)) await revokeLoginRole(pool, login).catch(() => {});
    } catch {
      // Its server is unreachable or no longer configured: nothing to drop from here.
    }
  }
}

const backup: (deps: ServiceDeps) => JobHandler = (deps) => ({
  async run(job, ctx) {
    const backupId = String(job.payload.backupId);
    const db = await loadDatabase(deps, job);
    if (db.deleted_at) throw new JobFatalError("database was deleted");
    if (db.status === "failure" && db.source.type === "empty") {
      // A database that never got provisioned has nothing to dump.
      const exists = await serverPool(deps, db).query("SELECT 1 FROM pg_database WHERE datname = $1", [db.pg_name]);
      if (!exists.rowCount) throw new JobFatalError("database does not exist on its server");
    }
    // The database may have grown since the request: past the workspace's byte quota, a manual backup fails here.
    await reserveBeforeDump(deps, db, backupId);
    const file = backupFile(deps, db.id, backupId);
    const { rows: logins } = await deps.pool.query<{ role_name: string }>(
      "SELECT role_name FROM connections WHERE database_id = $1",
      [db.id],
    );
    let result;
    try {
      await privateDirectory(deps.config.backupDir);
      await privateDirectory(path.dirname(file));
      result = await dumpAsOwner(deps, {
        jobId: job.id,
        at: db,
        pgName: db.pg_name,
        ownerRole: db.owner_role,
        loginRoles: logins.map((l) => l.role_name),
        file,
        archive: archiveKey(deps, backupId),
        signal: ctx.signal,
      });
    } catch (err) {
      if (!isNoSpace(err)) throw err;
      // The volume is the service's, not the tenant's: not retried in seconds (it stays full until someone frees it),
      // and not charged to the workspace's failed attempts (domain/job-budget.ts counts "failed", not this outcome).
      // dumpDatabase deleted the partial archive, so the space this attempt took is free again.
      await ctx.outcome("volume-full");
      throw new JobFatalError(
        "the backup volume is full (no space left on device): the partial archive was deleted; ask for a backup again once the service's operator has freed or grown it",
        { cause: err },
      );
    }
    await deps.pool.query(
      "UPDATE backups SET status = 'completed', size = $2, sha256 = $3, path = $4, data_bytes = $5, completed_at = now() WHERE id = $1",
      [backupId, result.size, result.sha256, file, result.dataBytes ? JSON.stringify(result.dataBytes) : null],
    );
    await ctx.outcome("completed");
  },
  async fail(job) {
    await dropJobLogins(deps, job);
    const backupId = String(job.payload.backupId);
    await deps.pool.query(
      "UPDATE backups SET status = 'failed', completed_at = now() WHERE id = $1 AND status = 'running'",
      [backupId],
    );
    await rm(backupFile(deps, job.target_id, backupId), { force: true });
  },
});

// The tenant owns its database and may comment on it: the marker carries a MAC under the service's key, so a tenant
// cannot plant the marker of a coming restore job to make it believe its swap already happened.
const restoreMarker = (deps: ServiceDeps, job: Job) =>
  `mds:restore:${job.id}:${createHmac("sha256", deps.config.encryptionKey).update(`restore marker ${job.id}`).digest("base64url")}`;
const scratchName = (pgName: string, job: Job) => `${pgName}_r${job.id}`;
const oldName = (pgName: string, job: Job) => `${pgName}_o${job.id}`;

const restore: (deps: ServiceDeps) => JobHandler = (deps) => ({
  async run(job, ctx) {
    const db = await loadDatabase(deps, job);
    if (db.deleted_at) throw new JobFatalError("database was deleted");
    const pool = serverPool(deps, db);
    const scratch = scratchName(db.pg_name, job);
    const old = oldName(db.pg_name, job);
    // The marker moves with the scratch database's rename: if the target carries it, this job's swap already happened.
    if ((await databaseComment(pool, db.pg_name)) === restoreMarker(deps, job)) {
      await ctx.outcome("resumed-after-swap", { durable: true });
    } else {
      const t0 = performance.now();
      await dropDatabaseIfExists(pool, scratch);
      await allowConnections(pool, db.pg_name);
      const backup = await usableBackup(deps, String(job.payload.backupId));
      // The scratch database becomes the target by a rename, so it is made with the target's limits.
      await createDatabase(pool, scratch, db.owner_role, tenantLimitsOf(deps.config, db.region));
      const t1 = performance.now();
      const passes = await restoreAsOwner(deps, {
        jobId: job.id,
        at: db,
        pgName: scratch,
        ownerRole: db.owner_role,
        backup,
        signal: ctx.signal,
      });
      // Past the time limit nothing is swapped in: the attempt ends here with the old data in place.
      ctx.signal.throwIfAborted();
      const t2 = performance.now();
      await swapDatabases(pool, { target: db.pg_name, scratch, old, marker: restoreMarker(deps, job) });
      await ctx.outcome("restored", { durable: true });
      deps.logger.debug(
        {
          job: job.id,
          prepareMs: Math.round(t1 - t0),
          pgRestoreMs: Math.round(t2 - t1),
          swapMs: Math.round(performance.now() - t2),
          passes,
        },
        "restore swapped",
      );
    }
    // Dropping the old copy can wait behind a checkpoint: the database is already usable, so report ready first.
    await settleRestore(deps, job, "ready");
    await dropDatabaseIfExists(pool, old);
  },
  async fail(job, err) {
    await dropJobLogins(deps, job);
    const db = await getDatabaseById(deps.pool, job.target_id);
    if (db) {
      const pool = serverPool(deps, db);
      await dropDatabaseIfExists(pool, scratchName(db.pg_name, job)).catch(() => {});
      await allowConnections(pool, db.pg_name).catch(() => {});
    }
    await settleRestore(deps, job, "failure", err.message);
  },
});

/** Ends `recovering`, unless a later restore was accepted meanwhile (it owns the status now). */
async function settleRestore(deps: ServiceDeps, job: Job, status: "ready" | "failure", reason?: string): Promise<void> {
  await deps.pool.query(
    `UPDATE databases SET status = $3, failure_reason = coalesce($4, failure_reason) WHERE id = $1 AND status = 'recovering'
       AND NOT EXISTS (SELECT 1 FROM jobs WHERE target_id = $1 AND kind = 'restore' AND state = 'pending' AND id > $2)`,
    [job.target_id, job.id, status, reason?.slice(0, 500) ?? null],
  );
}

const drop: (deps: ServiceDeps) => JobHandler = (deps) => ({
  async run(job, ctx) {
    const db = await loadDatabase(deps, job);
    const { rows } = await deps.pool.query<{ role_name: string }>(
      "SELECT role_name FROM connections WHERE database_id = $1",
      [db.id],
    );
    await dropDatabase(serverPool(deps, db), {
      pgName: db.pg_name,
      ownerRole: db.owner_role,
      loginRoles: rows.map((r) => r.role_name),
    });
    await rm(path.join(deps.config.backupDir, db.id), { recursive: true, force: true });
    await deps.pool.query("UPDATE backups SET deleted_at = coalesce(deleted_at, now()) WHERE database_id = $1", [
      db.id,
    ]);
    await ctx.outcome("dropped");
  },
  async fail() {
    // The database is already invisible to the API; an operator can drop leftovers by their mds_ names.
  },
});

export function jobHandlers(deps: ServiceDeps): Record<JobKind, JobHandler> {
  return { provision: provision(deps), backup: backup(deps), restore: restore(deps), drop: drop(deps) };
}
