import { rm } from "node:fs/promises";
import path from "node:path";
import type { ServiceDeps } from "../runtime/deps.ts";
import { privateDirectory } from "./dump.ts";
import { JobFatalError, type Job } from "../queue/jobs.ts";
import { archiveKey, dumpAsOwner, restoreAsOwner } from "./owner-dump.ts";
import type { DatabaseRow } from "../store/rows.ts";
import { getDatabaseById } from "../store/queries.ts";

// `source: { type: "database" }`: a new database that starts as a copy of a live one. The copy is a pg_dump
// snapshot of the source (consistent, and read-only for the source) restored into the new database by its
// provision job, through the same owner-only dump and restore as backups (never as the superuser), sealed at rest
// like a backup while it exists. (The source is checked at creation: checkCloneSource in domain/sources.ts.)

/** In the provision job, after the new (empty) database and its roles exist: fills it with the source's data. */
export async function cloneInto(
  deps: ServiceDeps,
  target: DatabaseRow,
  sourceId: string,
  job: Job,
  signal: AbortSignal,
): Promise<void> {
  const source = await getDatabaseById(deps.pool, sourceId);
  if (!source || source.deleted_at) throw new JobFatalError(`source database ${sourceId} was deleted`);
  const { rows } = await deps.pool.query<{ role_name: string }>(
    "SELECT role_name FROM connections WHERE database_id = $1 AND revoked_at IS NULL",
    [source.id],
  );
  // Under the new database's backup directory, so dropping the new database also removes a leftover of a crash.
  const dir = path.join(deps.config.backupDir, target.id);
  await privateDirectory(dir);
  const archiveId = `clone-${job.id}`;
  const file = path.join(dir, `${archiveId}.dump`);
  try {
    const { sha256 } = await dumpAsOwner(deps, {
      jobId: job.id,
      at: source,
      pgName: source.pg_name,
      ownerRole: source.owner_role,
      loginRoles: rows.map((r) => r.role_name),
      file,
      archive: archiveKey(deps, archiveId),
      signal,
    });
    await restoreAsOwner(deps, {
      jobId: job.id,
      at: target,
      pgName: target.pg_name,
      ownerRole: target.owner_role,
      backup: { id: archiveId, path: file, sha256, sealed: true },
      signal,
    });
  } finally {
    await rm(file, { force: true });
  }
}
