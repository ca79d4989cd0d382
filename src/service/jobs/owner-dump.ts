import { ArchiveError } from "./backup-archive.ts";
import { lockTimeoutOf, tenantLimitsOf } from "../config/config.ts";
import { adminUrlOf, serverPool, type ServiceDeps } from "../runtime/deps.ts";
import {
  dumpDatabase,
  restoreDatabase,
  verifyArchive,
  type ArchiveKey,
  type DumpResult,
  type LoginFor,
} from "./dump.ts";
import { jobLoginName, withOwnerLogin } from "./job-login.ts";
import { JobFatalError, JobLimitError } from "../queue/jobs.ts";
import { ArchiveLimitError } from "./restore-plan.ts";
import type { ServerRef } from "../placement/servers.ts";
import { getBackup } from "../store/queries.ts";

// "Dump database X as its owner" and "restore an archive into database Y as its owner": what backups, restores,
// creation from a backup (and clones) are made of. Neither ever runs as the region's superuser (see job-login.ts).

/** Backups are sealed under the service's key, bound to their backup id (see backup-archive.ts). */
export const archiveKey = (deps: ServiceDeps, backupId: string): ArchiveKey => ({
  key: deps.config.encryptionKey,
  context: backupId,
});

/**
 * An archive past the service's limits fails its job for good, naming the setting; a retry would meet it again.
 * Rethrows anything else unchanged.
 */
export function limitsAsFatal(err: unknown): never {
  if (err instanceof ArchiveLimitError)
    throw new JobLimitError(`${err.message}, the most this service dumps or restores (archiveEntryLimit)`, {
      cause: err,
    });
  throw err;
}

/** `sealed` as verifyArchive judged the file: the restore holds to it. */
type UsableBackup = {
  id: string;
  path: string;
  sha256: string;
  sealed: boolean;
  /** Recorded at dump time (backups.data_bytes): the restore's plan then reads only the table of contents. */
  dataBytes?: Record<string, number>;
};

export async function usableBackup(deps: ServiceDeps, backupId: string): Promise<UsableBackup> {
  const backup = await getBackup(deps.pool, backupId);
  if (!backup || backup.status !== "completed" || !backup.path || !backup.sha256)
    throw new JobFatalError(`backup ${backupId} is not usable`);
  try {
    const { sealed } = await verifyArchive(backup.path, backup.sha256);
    return {
      id: backupId,
      path: backup.path,
      sha256: backup.sha256,
      sealed,
      ...(backup.data_bytes ? { dataBytes: backup.data_bytes } : {}),
    };
  } catch (err) {
    throw new JobFatalError(`backup ${backupId} cannot be read: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Dumps database `pgName` (on the server `at`) into `file` as a login holding only the database's own roles (its owner, and the login
 * roles that may own objects a client created after RESET ROLE). For backups and, later, clones.
 */
export async function dumpAsOwner(
  deps: ServiceDeps,
  input: {
    jobId: string;
    at: ServerRef;
    pgName: string;
    ownerRole: string;
    loginRoles: string[];
    file: string;
    archive: ArchiveKey;
    signal: AbortSignal;
  },
): Promise<DumpResult> {
  const pool = serverPool(deps, input.at);
  const { rows } = await pool.query<{ rolname: string }>("SELECT rolname FROM pg_roles WHERE rolname = ANY($1)", [
    input.loginRoles,
  ]);
  const memberOf = [input.ownerRole, ...rows.map((r) => r.rolname)];
  return withOwnerLogin(
    { pool, adminUrl: adminUrlOf(deps, input.at), name: jobLoginName(input.jobId, "dump"), memberOf },
    (login) =>
      dumpDatabase({
        bindir: deps.bindir,
        login,
        database: input.pgName,
        file: input.file,
        archive: input.archive,
        lockTimeoutMs: lockTimeoutOf(deps.config, input.at.region),
        maxEntries: deps.config.archiveEntryLimit,
        signal: input.signal,
      }).catch(limitsAsFatal),
  );
}

/**
 * Restores a backup into the existing, empty database `pgName` (on the server `at`) as a login holding only its owner
 * role. The archive may come from any server: it is a file of the service's, not of a server.
 */
export async function restoreAsOwner(
  deps: ServiceDeps,
  input: { jobId: string; at: ServerRef; pgName: string; ownerRole: string; backup: UsableBackup; signal: AbortSignal },
): Promise<Record<string, number>> {
  const pool = serverPool(deps, input.at);
  // Every pg_restore run logs in by a login of its own (one session each); a retry reuses the names, so a crashed
  // attempt's logins are revoked before they log in again.
  const loginFor: LoginFor = (pass, fn) =>
    withOwnerLogin(
      {
        pool,
        adminUrl: adminUrlOf(deps, input.at),
        name: jobLoginName(input.jobId, "restore", pass),
        memberOf: [input.ownerRole],
      },
      fn,
    );
  const jobs = Math.min(deps.config.restoreJobs, tenantLimitsOf(deps.config, input.at.region).databaseConnectionLimit);
  return restoreDatabase({
    bindir: deps.bindir,
    loginFor,
    database: input.pgName,
    file: input.backup.path,
    ...(input.backup.sealed ? {} : { plainSha256: input.backup.sha256 }),
    ...(input.backup.dataBytes ? { dataBytes: input.backup.dataBytes } : {}),
    archive: archiveKey(deps, input.backup.id),
    role: input.ownerRole,
    split: { jobs, minBytes: deps.config.restoreSplitMinBytes },
    maxEntries: deps.config.archiveEntryLimit,
    signal: input.signal,
  }).catch((err: unknown) => {
    // An archive that does not authenticate will not authenticate on a retry either.
    if (err instanceof ArchiveError) throw new JobFatalError(err.message, { cause: err });
    return limitsAsFatal(err);
  });
}
