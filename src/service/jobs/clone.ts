import { rm } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { lockTimeoutOf, tenantLimitsOf } from "../config/config.ts";
import { adminUrlOf, serverPool, type ServiceDeps } from "../runtime/deps.ts";
import { dumpDatabase, pipeTables, privateDirectory, restoreDatabase, type LoginFor } from "./dump.ts";
import { jobLoginName, withOwnerLogin, type DatabaseLogin } from "./job-login.ts";
import { JobFatalError, type Job } from "../queue/jobs.ts";
import { archiveKey, dumpAsOwner, limitsAsFatal, restoreAsOwner } from "./owner-dump.ts";
import { dealBySize, exactTablePattern } from "./restore-plan.ts";
import { pinnedSessionOptions } from "../../postgres/session-options.ts";
import type { DatabaseRow } from "../store/rows.ts";
import { getDatabaseById } from "../store/queries.ts";

// `source: { type: "database" }`: a new database that starts as a copy of a live one, filled by its provision job,
// through owner-only logins (never the superuser), consistent as of one moment of the source.
//
// A small source is dumped by one pg_dump into an archive sealed at rest like a backup, then restored. A source of
// `restoreSplitMinBytes` or more is copied as `pg_dump -j` + `pg_restore -j` would, all under one snapshot: a session of
// its own exports a snapshot and holds ACCESS SHARE on every table (so no table is rewritten or dropped under it);
// its largest tables (up to `pipedTables`) are dealt by size over `restoreJobs` lanes, each a `pg_dump --data-only`
// piped straight into a `pg_restore` of the new database (that data never touches the disk); everything else (the
// schema, the other tables' data, sequences, large objects, materialized views) is one sealed archive of the same
// snapshot, restored in parallel passes (dump.ts) with the lanes between its data and its indexes.

/** Tables at most piped past the archive: each is a `-t` pattern (one catalog query in pg_dump). */
const pipedTables = 100;
/** Smaller tables ride in the archive: a lane of its own would cost more than it saves. */
const pipedMinBytes = 1024 ** 2;

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
  const input = { deps, source, target, job, loginRoles: rows.map((r) => r.role_name), file, archiveId, signal };
  try {
    const { rows: size } = await serverPool(deps, source).query<{ bytes: string }>(
      "SELECT pg_catalog.pg_database_size($1::text::pg_catalog.name) AS bytes",
      [source.pg_name],
    );
    if (deps.config.restoreJobs > 1 && Number(size[0]!.bytes) >= deps.config.restoreSplitMinBytes)
      await parallelClone(input).catch(limitsAsFatal);
    else await serialClone(input);
  } finally {
    await rm(file, { force: true });
  }
}

type CloneInput = {
  deps: ServiceDeps;
  source: DatabaseRow;
  target: DatabaseRow;
  job: Job;
  loginRoles: string[];
  file: string;
  archiveId: string;
  signal: AbortSignal;
};

async function serialClone({ deps, source, target, job, loginRoles, file, archiveId, signal }: CloneInput) {
  const { sha256, dataBytes } = await dumpAsOwner(deps, {
    jobId: job.id,
    at: source,
    pgName: source.pg_name,
    ownerRole: source.owner_role,
    loginRoles,
    file,
    archive: archiveKey(deps, archiveId),
    signal,
  });
  await restoreAsOwner(deps, {
    jobId: job.id,
    at: target,
    pgName: target.pg_name,
    ownerRole: target.owner_role,
    backup: { id: archiveId, path: file, sha256, sealed: true, ...(dataBytes ? { dataBytes } : {}) },
    signal,
  });
}

/** The source's tables (ACCESS SHARE, as pg_dump locks them), the snapshot session's first act after the export. */
const lockTables = `DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid::pg_catalog.regclass AS rel FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
      AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
  LOOP
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS SHARE MODE', r.rel);
  END LOOP;
END $$`;

/** The tables worth a lane: plain tables of the tenant's (not of an extension), largest first. */
const largeTables = `SELECT n.nspname AS schema, c.relname AS name, pg_catalog.pg_table_size(c.oid)::float8 AS size
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'r' AND c.relpersistence <> 't' AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'
    AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
      WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
    AND pg_catalog.pg_table_size(c.oid) >= $1
  ORDER BY 3 DESC, 1, 2 LIMIT $2`;

async function parallelClone({ deps, source, target, job, loginRoles, file, archiveId, signal }: CloneInput) {
  const sourcePool = serverPool(deps, source);
  const { rows: logins } = await sourcePool.query<{ rolname: string }>(
    "SELECT rolname FROM pg_roles WHERE rolname = ANY($1)",
    [loginRoles],
  );
  // As a backup: the source's owner and the login roles that may own objects a client created after RESET ROLE.
  const memberOf = [source.owner_role, ...logins.map((r) => r.rolname)];
  const dumpLogin = <T>(pass: string, fn: (login: DatabaseLogin) => Promise<T>) =>
    withOwnerLogin(
      { pool: sourcePool, adminUrl: adminUrlOf(deps, source), name: jobLoginName(job.id, "dump", pass), memberOf },
      fn,
    );
  const restoreLogin: LoginFor = (pass, fn) =>
    withOwnerLogin(
      {
        pool: serverPool(deps, target),
        adminUrl: adminUrlOf(deps, target),
        name: jobLoginName(job.id, "restore", pass),
        memberOf: [target.owner_role],
      },
      fn,
    );
  // The snapshot session is one more on the source, within its connection limit.
  const jobs = Math.max(
    1,
    Math.min(
      deps.config.restoreJobs,
      tenantLimitsOf(deps.config, target.region).databaseConnectionLimit,
      tenantLimitsOf(deps.config, source.region).databaseConnectionLimit - 1,
    ),
  );
  const lockTimeoutMs = lockTimeoutOf(deps.config, source.region);
  const archive = archiveKey(deps, archiveId);
  await dumpLogin("snap", async (login) => {
    const url = new URL(adminUrlOf(deps, source));
    url.username = encodeURIComponent(login.user);
    url.password = encodeURIComponent(login.password);
    url.pathname = `/${encodeURIComponent(source.pg_name)}`;
    // One session, which runs no tenant code: it exports the snapshot and holds the locks until the copy is done.
    const session = new pg.Client({
      connectionString: url.toString(),
      options: pinnedSessionOptions(lockTimeoutMs),
      connectionTimeoutMillis: 10_000,
    });
    session.on("error", () => {});
    await session.connect();
    try {
      await session.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const { rows: exported } = await session.query<{ id: string }>("SELECT pg_catalog.pg_export_snapshot() AS id");
      const snapshot = exported[0]!.id;
      await session.query(lockTables);
      const { rows: tables } = await session.query<{ schema: string; name: string; size: number }>(largeTables, [
        pipedMinBytes,
        pipedTables,
      ]);
      const piped = tables.map((t) => exactTablePattern(t.schema, t.name));
      await dumpLogin("schema", (login) =>
        dumpDatabase({
          bindir: deps.bindir,
          login,
          database: source.pg_name,
          file,
          archive,
          lockTimeoutMs,
          options: [`--snapshot=${snapshot}`, ...piped.map((p) => `--exclude-table-data=${p}`)],
          maxEntries: deps.config.archiveEntryLimit,
          signal,
        }),
      );
      const lanes = dealBySize(
        tables.map((t, i) => ({ item: piped[i]!, size: t.size })),
        jobs,
      );
      await restoreDatabase({
        bindir: deps.bindir,
        loginFor: restoreLogin,
        database: target.pg_name,
        file,
        archive,
        role: target.owner_role,
        split: { jobs, minBytes: 0 },
        maxEntries: deps.config.archiveEntryLimit,
        moreData: async (signal, track) => {
          await Promise.all(
            lanes.map((patterns, i) =>
              track(() =>
                dumpLogin(`d${i}`, (from) =>
                  restoreLogin(`p${i}`, (to) =>
                    pipeTables({
                      bindir: deps.bindir,
                      source: { login: from, database: source.pg_name },
                      target: { login: to, database: target.pg_name },
                      snapshot,
                      patterns,
                      role: target.owner_role,
                      lockTimeoutMs,
                      signal,
                    }),
                  ),
                ),
              ),
            ),
          );
        },
        signal,
      });
      await session.query("COMMIT");
    } finally {
      await session.end().catch(() => {});
    }
  });
}
