import type pg from "pg";
import { newId } from "../../contract/index.ts";
import type { ServiceDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
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

/** POST …/backups, in one transaction with its Idempotency-Key record. `respond` renders it: that rendering is what a replay returns. */
export function takeBackup(deps: ServiceDeps, request: CreationRequest, databaseId: string, respond: (backup: BackupRow) => StoredResponse): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const db = await getDatabase(client, request.workspaceId, databaseId, true);
    if (!db) throw notFound("database", databaseId);
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
