import type pg from "pg";
import { newId } from "../../contract/index.ts";
import type { ServiceDeps } from "../deps.ts";
import type { ServiceConfig } from "../config.ts";
import { conflict, notFound } from "../errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "../idempotency.ts";
import { enqueueJob } from "../jobs.ts";
import type { BackupRow } from "../rows.ts";
import { getDatabase, listBackups } from "../store.ts";

// A backup is a row and a `backup` job (job-handlers.ts) that pg_dumps the database into a sealed archive. Manual
// ones come from the API, daily ones from the maintenance pass (scheduler.ts).

/** The newest backups of a database of the workspace, newest first; 404 for an unknown database. */
export async function backupPage(deps: ServiceDeps, workspaceId: string, databaseId: string, q: { limit?: number | undefined }) {
  const limit = q.limit ?? 100;
  const db = await getDatabase(deps.pool, workspaceId, databaseId);
  if (!db) throw notFound("database", databaseId);
  const rows = await listBackups(deps.pool, databaseId, limit);
  return { items: rows.slice(0, limit), hasMore: rows.length > limit, limit };
}

// Any fixed number (with the workspace's hash): serialises one workspace's backup requests until their transactions end.
const quotaLock = 7_221_023;

/**
 * One workspace must not fill the backup disk. Manual backups count against `backupsPerWorkspace` (running and
 * completed ones, until they expire); the bytes of every kept backup (daily ones too) against
 * `backupBytesPerWorkspace`. Daily backups are never refused: they are the service's promise. Nothing is deleted to
 * make room: a refused request is a 409 that names the limit. Bytes are known once a backup completes, so the one
 * that crosses the limit is taken; the next is refused.
 */
async function checkBackupQuota(client: pg.PoolClient, config: Pick<ServiceConfig, "backupsPerWorkspace" | "backupBytesPerWorkspace" | "backupRetentionDays">, workspaceId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [quotaLock, workspaceId]);
  const { rows } = await client.query<{ manual: number; bytes: string }>(
    `SELECT count(*) FILTER (WHERE b.trigger = 'manual')::int AS manual, coalesce(sum(b.size), 0)::text AS bytes
     FROM backups b JOIN databases d ON d.id = b.database_id
     WHERE d.workspace_id = $1 AND b.deleted_at IS NULL AND b.status <> 'failed'`,
    [workspaceId],
  );
  const { manual, bytes } = rows[0]!;
  const hint = `backups expire ${config.backupRetentionDays} days after they were taken; or ask the service's operator to raise`;
  if (manual >= config.backupsPerWorkspace) {
    throw conflict(`cannot take a backup: this workspace keeps ${manual} manual backups, its limit is ${config.backupsPerWorkspace}`, `${hint} backupsPerWorkspace`);
  }
  if (Number(bytes) >= config.backupBytesPerWorkspace) {
    throw conflict(`cannot take a backup: this workspace's backups hold ${bytes} bytes, its limit is ${config.backupBytesPerWorkspace} bytes`, `${hint} backupBytesPerWorkspace`);
  }
}

/** POST …/backups, in one transaction with its Idempotency-Key record. `respond` renders it: that rendering is what a replay returns. */
export function takeBackup(deps: ServiceDeps, request: CreationRequest, databaseId: string, respond: (backup: BackupRow) => StoredResponse): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const db = await getDatabase(client, request.workspaceId, databaseId, true);
    if (!db) throw notFound("database", databaseId);
    await checkBackupQuota(client, deps.config, request.workspaceId);
    return respond(await insertBackup(client, databaseId, "manual"));
  });
}

/** The backup's row and its job; runs in the caller's transaction. */
export async function insertBackup(client: Pick<pg.Pool, "query">, databaseId: string, trigger: "manual" | "daily"): Promise<BackupRow> {
  const id = newId("backup");
  const { rows } = await client.query<BackupRow>(
    "INSERT INTO backups (id, database_id, status, trigger) VALUES ($1, $2, 'running', $3) RETURNING id, database_id, status, size, sha256, path, created_at",
    [id, databaseId, trigger],
  );
  await enqueueJob(client, { kind: "backup", targetId: databaseId, payload: { backupId: id } });
  return rows[0]!;
}
