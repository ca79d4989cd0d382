import type pg from "pg";
import { notFound, unprocessable } from "../shared/errors.ts";
import { getBackup, getDatabase } from "../store/queries.ts";

// Where a database's data comes from, checked in the caller's transaction against the caller's workspace: a backup
// (at creation or restore) or a live database (a clone, copied by the provision job: jobs/clone.ts).

/** `source: backup`: 404 for an unknown database or backup, 422 for a backup that is not completed. */
export async function checkBackupSource(
  client: pg.PoolClient,
  workspaceId: string,
  source: { databaseId: string; backupId: string },
): Promise<void> {
  const sourceDb = await getDatabase(client, workspaceId, source.databaseId);
  if (!sourceDb) throw notFound("database", source.databaseId);
  const backup = await getBackup(client, source.backupId, "share");
  // Another database's backup (perhaps another workspace's) answers exactly as one that never existed: no oracle.
  if (!backup || backup.database_id !== source.databaseId) throw notFound("backup", source.backupId);
  if (backup.status !== "completed")
    throw unprocessable(
      `backup "${source.backupId}" is ${backup.status}, not completed`,
      "wait until the backup is completed",
    );
}

/** `source: database`: the source must be a ready database of the caller's workspace. */
export async function checkCloneSource(
  client: pg.PoolClient,
  workspaceId: string,
  source: { databaseId: string },
): Promise<void> {
  const db = await getDatabase(client, workspaceId, source.databaseId);
  if (!db) throw notFound("database", source.databaseId);
  if (db.status !== "ready")
    throw unprocessable(
      `database "${source.databaseId}" is ${db.status}, not ready, and cannot be cloned`,
      "wait until the source database is ready, then retry",
    );
}
