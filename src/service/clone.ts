import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { adminUrlOf, type ServiceDeps } from "./deps.ts";
import { dumpDatabase, restoreDatabase } from "./dump.ts";
import { notFound, unprocessable } from "./errors.ts";
import { JobFatalError, type Job } from "./jobs.ts";
import type { DatabaseRow } from "./rows.ts";
import { getDatabase, getDatabaseById } from "./store.ts";

// `source: { type: "database" }`: a new database that starts as a copy of a live one. The copy is a pg_dump
// snapshot of the source (consistent, and read-only for the source) restored into the new database by its
// provision job, through the same dump and restore functions as backups.

/** At creation, in the caller's transaction: the source must be a ready database of the caller's workspace. */
export async function checkCloneSource(client: pg.PoolClient, workspaceId: string, source: { databaseId: string }): Promise<void> {
  const db = await getDatabase(client, workspaceId, source.databaseId);
  if (!db) throw notFound("database", source.databaseId);
  if (db.status !== "ready") throw unprocessable(`database "${source.databaseId}" is ${db.status}, not ready, and cannot be cloned`, "wait until the source database is ready, then retry");
}

/** In the provision job, after the new (empty) database and its roles exist: fills it with the source's data. */
export async function cloneInto(deps: ServiceDeps, target: DatabaseRow, sourceId: string, job: Job): Promise<void> {
  const source = await getDatabaseById(deps.pool, sourceId);
  if (!source || source.deleted_at) throw new JobFatalError(`source database ${sourceId} was deleted`);
  // Under the new database's backup directory, so dropping the new database also removes a leftover of a crash.
  const file = path.join(deps.config.backupDir, target.id, `clone-${job.id}.dump`);
  await mkdir(path.dirname(file), { recursive: true });
  try {
    await dumpDatabase({ bindir: deps.bindir, adminUrl: adminUrlOf(deps, source.region), database: source.pg_name, file });
    await restoreDatabase({ bindir: deps.bindir, adminUrl: adminUrlOf(deps, target.region), database: target.pg_name, file, role: target.owner_role });
  } finally {
    await rm(file, { force: true });
  }
}
