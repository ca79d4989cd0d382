import { rm, statfs } from "node:fs/promises";
import type pg from "pg";
import { newId } from "../../contract/index.ts";
import { serverPool, type ServiceDeps } from "../runtime/deps.ts";
import type { ServiceConfig } from "../config/config.ts";
import { conflict, notFound, ServiceError } from "../shared/errors.ts";
import { checkFailureBudget } from "./job-budget.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { enqueueJob, JobFatalError } from "../queue/jobs.ts";
import type { BackupRow, DatabaseRow } from "../store/rows.ts";
import { getBackup, getDatabase, listBackups } from "../store/queries.ts";
import { inTransaction } from "../store/pool.ts";

// A backup is a row and a `backup` job (jobs/handlers.ts) that pg_dumps the database into a sealed archive. Manual
// ones come from the API, daily ones from the maintenance pass (jobs/scheduler.ts).

/** The newest backups of a database of the workspace, newest first; 404 for an unknown database. */
export async function backupPage(
  deps: ServiceDeps,
  workspaceId: string,
  databaseId: string,
  q: { limit?: number | undefined },
) {
  const limit = q.limit ?? 100;
  const db = await getDatabase(deps.pool, workspaceId, databaseId);
  if (!db) throw notFound("database", databaseId);
  const rows = await listBackups(deps.pool, databaseId, limit);
  return { items: rows.slice(0, limit), hasMore: rows.length > limit, limit };
}

// Any fixed number (with the workspace's hash): serialises one workspace's backup requests (and their jobs' checks
// before pg_dump) until their transactions end.
const quotaLock = 7_221_023;

type QuotaConfig = Pick<ServiceConfig, "backupsPerWorkspace" | "backupBytesPerWorkspace" | "backupRetentionDays">;

/**
 * One workspace must not fill the backup disk. Manual backups count against `backupsPerWorkspace` (running and
 * completed ones, until they expire); the bytes of every kept backup (daily ones too) against
 * `backupBytesPerWorkspace`: a completed one its archive's size, a running one its reservation (its database's size,
 * `pg_database_size`, a bound above its archive's). A manual backup is taken only if its own reservation fits too,
 * so a hundred concurrent requests cannot all pass while nothing has completed yet. Daily backups are never refused
 * (they are the service's promise) but their bytes count: a workspace near its limit has its manual backups refused
 * first. Nothing is deleted to make room: a refused request is a 409 that names the limit.
 */
async function checkBackupQuota(
  client: pg.PoolClient,
  config: QuotaConfig,
  workspaceId: string,
  input: { estimate: number; except?: string },
): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [quotaLock, workspaceId]);
  const { rows } = await client.query<{ manual: number; bytes: string }>(
    `SELECT count(*) FILTER (WHERE b.trigger = 'manual')::int AS manual, coalesce(sum(coalesce(b.size, b.reserved_bytes, 0)), 0)::text AS bytes
     FROM backups b JOIN databases d ON d.id = b.database_id
     WHERE d.workspace_id = $1 AND b.deleted_at IS NULL AND b.status <> 'failed' AND b.id IS DISTINCT FROM $2`,
    [workspaceId, input.except ?? null],
  );
  const { manual, bytes } = rows[0]!;
  const hint = `backups expire ${config.backupRetentionDays} days after they were taken; or ask the service's operator to raise`;
  if (input.except === undefined && manual >= config.backupsPerWorkspace) {
    throw conflict(
      `cannot take a backup: this workspace keeps ${manual} manual backups, its limit is ${config.backupsPerWorkspace}`,
      `${hint} backupsPerWorkspace`,
    );
  }
  if (Number(bytes) + input.estimate > config.backupBytesPerWorkspace) {
    throw conflict(
      `cannot take a backup: this workspace's backups hold or reserve ${bytes} bytes and this one needs up to ${input.estimate} (its database's size), its limit is ${config.backupBytesPerWorkspace} bytes`,
      `${hint} backupBytesPerWorkspace`,
    );
  }
}

/**
 * What a backup of `db` reserves: the database's size on its server, a bound above its archive's (pg_dump writes the
 * rows compressed, and no index). A server out of reach: its last archive's size (the job checks again before pg_dump).
 */
async function backupEstimate(deps: ServiceDeps, db: DatabaseRow): Promise<number> {
  try {
    const { rows } = await serverPool(deps, db).query<{ size: string }>(
      "SELECT coalesce((SELECT pg_catalog.pg_database_size(oid) FROM pg_catalog.pg_database WHERE datname = $1), 0)::text AS size",
      [db.pg_name],
    );
    return Number(rows[0]!.size);
  } catch {
    const { rows } = await deps.pool.query<{ size: string }>(
      "SELECT coalesce((SELECT size FROM backups WHERE database_id = $1 AND status = 'completed' ORDER BY created_at DESC LIMIT 1), 0)::text AS size",
      [db.id],
    );
    return Number(rows[0]!.size);
  }
}

/**
 * In the backup job, before pg_dump: the database may have grown since the request. Its reservation becomes its size
 * now; a manual backup that no longer fits fails (with the limit named), a daily one is never refused.
 */
export async function reserveBeforeDump(deps: ServiceDeps, db: DatabaseRow, backupId: string): Promise<void> {
  const estimate = await backupEstimate(deps, db);
  await inTransaction(deps.pool, async (client) => {
    const { rows } = await client.query<{ trigger: string }>("SELECT trigger FROM backups WHERE id = $1", [backupId]);
    if (rows[0]?.trigger === "manual") {
      try {
        await checkBackupQuota(client, deps.config, db.workspace_id, { estimate, except: backupId });
      } catch (err) {
        throw new JobFatalError(
          err instanceof ServiceError
            ? `${err.message} (the database grew after the backup was requested)`
            : (err as Error).message,
          { cause: err },
        );
      }
    }
    await client.query("UPDATE backups SET reserved_bytes = $2 WHERE id = $1", [backupId, estimate]);
  });
}

/** POST …/backups, in one transaction with its Idempotency-Key record. `respond` renders it: that rendering is what a replay returns. */
export function takeBackup(
  deps: ServiceDeps,
  request: CreationRequest,
  databaseId: string,
  respond: (backup: BackupRow) => StoredResponse,
): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const db = await getDatabase(client, request.workspaceId, databaseId, true);
    if (!db) throw notFound("database", databaseId);
    await checkFailureBudget(client, deps.config, request.workspaceId, "take a backup");
    const estimate = await backupEstimate(deps, db);
    await checkBackupQuota(client, deps.config, request.workspaceId, { estimate });
    await checkBackupVolume(deps, estimate);
    return respond(await insertBackup(client, databaseId, "manual", estimate));
  });
}

/**
 * The backup volume is every workspace's: a manual backup is not started on a volume with less free space than its
 * reservation (its database's size, a bound above its archive's), so a full volume is a 409 at the request rather
 * than a failed backup later. Backups running at once may still fill it between them: the job that runs out of space
 * fails and deletes its partial archive (jobs/handlers.ts).
 */
async function checkBackupVolume(deps: ServiceDeps, estimate: number): Promise<void> {
  let free: number;
  try {
    const stats = await statfs(deps.config.backupDir);
    free = stats.bavail * stats.bsize;
  } catch {
    return; // Not measurable here: the job finds out.
  }
  if (free < estimate)
    throw conflict(
      `cannot take a backup: the backup volume has ${free} bytes free and this backup needs up to ${estimate} (its database's size)`,
      "the service's operator must free or grow the backup volume (backupDir); ask again then",
    );
}

/**
 * The backup's row and its job; runs in the caller's transaction. `reserved`: what it counts against the byte quota
 * until it completes; none given (daily backups), its database's last archive's size.
 */
export async function insertBackup(
  client: Pick<pg.Pool, "query">,
  databaseId: string,
  trigger: "manual" | "daily",
  reserved?: number,
): Promise<BackupRow> {
  const id = newId("backup");
  const { rows } = await client.query<BackupRow>(
    `INSERT INTO backups (id, database_id, status, trigger, reserved_bytes)
     VALUES ($1, $2, 'running', $3, coalesce($4, (SELECT size FROM backups WHERE database_id = $2 AND status = 'completed' ORDER BY created_at DESC LIMIT 1), 0))
     RETURNING id, database_id, status, size, sha256, path, created_at`,
    [id, databaseId, trigger, reserved ?? null],
  );
  await enqueueJob(client, { kind: "backup", targetId: databaseId, payload: { backupId: id } });
  return rows[0]!;
}

/**
 * DELETE …/backups/{backupId}: our service's extension (the public API has none; BackupSchedule's retention uses it).
 * Only a completed or failed manual backup of that database of the caller's workspace: any other id is 404, exactly
 * as one that never existed (no oracle across workspaces or databases), so a repeated DELETE is 404 too. A running
 * backup is 409 (its job would write the archive after the row left), a daily one 409 (the service's own promise; it
 * expires after backupRetentionDays), one a pending restore or a provisioning database reads 409 (it would fail
 * without its archive). The row is marked deleted (leaves the list and the quotas), then the archive is removed.
 */
export async function deleteBackup(
  deps: ServiceDeps,
  workspaceId: string,
  databaseId: string,
  backupId: string,
): Promise<void> {
  const archive = await inTransaction(deps.pool, async (client) => {
    const db = await getDatabase(client, workspaceId, databaseId);
    if (!db) throw notFound("database", databaseId);
    const backup = await getBackup(client, backupId, "update");
    if (!backup || backup.database_id !== databaseId) throw notFound("backup", backupId);
    const { rows } = await client.query<{ trigger: string }>("SELECT trigger FROM backups WHERE id = $1", [backupId]);
    if (backup.status === "running")
      throw conflict(`backup "${backupId}" is running`, "wait until it completes or fails, then delete it");
    if (rows[0]?.trigger === "daily")
      throw conflict(
        `backup "${backupId}" is a daily backup the service takes itself; only manual backups can be deleted`,
        `daily backups expire ${deps.config.backupRetentionDays} days after they were taken`,
      );
    const { rows: readers } = await client.query<{ what: string }>(
      `SELECT 'restore' AS what FROM jobs WHERE state = 'pending' AND kind = 'restore' AND payload->>'backupId' = $1
       UNION ALL
       SELECT 'database' FROM databases WHERE deleted_at IS NULL AND status = 'provisioning' AND source->>'backupId' = $1
       LIMIT 1`,
      [backupId],
    );
    if (readers.length > 0)
      throw conflict(
        `backup "${backupId}" is being read by a pending ${readers[0]!.what === "restore" ? "restore" : "database created from it"}`,
        "wait until the restore or the provisioning ends, then delete it",
      );
    await client.query("UPDATE backups SET deleted_at = now() WHERE id = $1", [backupId]);
    return backup.path;
  });
  // After the commit: a crash in between leaves an archive no row names (never a row naming no archive).
  if (archive) await rm(archive, { force: true });
}
