import { rm } from "node:fs/promises";
import type pg from "pg";
import type { ServiceDeps } from "../runtime/deps.ts";
import { insertBackup } from "../domain/backups.ts";
import { failedAttemptsSql } from "../domain/job-budget.ts";
import { inTransaction } from "../store/pool.ts";

const schedulerLock = 7_221_002;

/**
 * One maintenance pass: a daily backup for every ready database without one (completed, or daily and failed) in the
 * last 24 h, backups past retention removed (archive and row), expired idempotency records deleted, soft-deleted rows
 * past their retention purged. Replicas take turns through a lock.
 */
export async function runMaintenance(deps: ServiceDeps): Promise<{ scheduled: number; expired: number }> {
  const result = await inTransaction(deps.pool, async (client) => {
    const { rows: lock } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [
      schedulerLock,
    ]);
    if (!lock[0]?.ok) return { scheduled: 0, expired: [] as { id: string; path: string | null }[] };
    const { rows: candidates } = await client.query<{ id: string; workspace_id: string }>(
      `SELECT d.id, d.workspace_id FROM databases d WHERE d.deleted_at IS NULL AND d.status = 'ready'
         AND NOT EXISTS (SELECT 1 FROM backups b WHERE b.database_id = d.id AND b.deleted_at IS NULL
                         AND (b.status = 'running' OR (b.status = 'completed' AND b.created_at > now() - interval '24 hours')
                              OR (b.status = 'failed' AND b.trigger = 'daily' AND b.created_at > now() - interval '24 hours')))
       ORDER BY d.created_at LIMIT 1000`,
    );
    // A daily backup that failed (after its retries) is tried again the next day, not at every pass: a database whose
    // dump always fails (past archiveEntryLimit) would otherwise spend its workspace's budget of failures by itself.
    // A workspace whose jobs failed past its budget (domain/job-budget.ts) has its daily backups wait: a database
    // whose dump always fails would otherwise be dumped again at every pass. Counted once per workspace.
    const spent = new Set<string>();
    for (const workspace of new Set(candidates.map((c) => c.workspace_id))) {
      const { rows } = await client.query<{ n: number }>(`SELECT (${failedAttemptsSql("$1")}) AS n`, [workspace]);
      if (rows[0]!.n >= deps.config.failedJobAttemptsPerWorkspace) spent.add(workspace);
    }
    const due = candidates.filter((c) => !spent.has(c.workspace_id));
    for (const d of due) await insertBackup(client, d.id, "daily");
    const { rows: expired } = await client.query<{ id: string; path: string | null }>(
      `UPDATE backups SET deleted_at = now() WHERE deleted_at IS NULL AND status <> 'running'
         AND created_at < now() - $1 * interval '1 day' RETURNING id, path`,
      [deps.config.backupRetentionDays],
    );
    await client.query("DELETE FROM idempotency WHERE expires_at < now()");
    await purgeDeleted(client, deps.config.deletedRowRetentionDays);
    return { scheduled: due.length, expired };
  });
  for (const b of result.expired) if (b.path) await rm(b.path, { force: true });
  if (result.scheduled > 0) deps.wakeJobs();
  return { scheduled: result.scheduled, expired: result.expired.length };
}

/** Rows each purge statement removes at most per pass: a pass stays short, the next one takes more. */
const purgeBatch = 10_000;

/**
 * Soft-deleted rows past `days` go for good, children first (what still references a row keeps it): the backups and
 * connections of a purged database, databases whose jobs are all done (their drop job finished), then branches and
 * projects nothing references any more. Finished jobs and their runs, and expired access tokens, go after as long. Ids
 * are random and never reused.
 */
async function purgeDeleted(client: pg.PoolClient, days: number): Promise<void> {
  const old = `now() - ${Number(days)} * interval '1 day'`;
  const databases = `SELECT d.id FROM databases d WHERE d.deleted_at < ${old}
    AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.target_id = d.id AND j.state = 'pending') LIMIT ${purgeBatch}`;
  const { rows } = await client.query<{ id: string }>(databases);
  const ids = rows.map((r) => r.id);
  if (ids.length) {
    await client.query("DELETE FROM connections WHERE database_id = ANY($1)", [ids]);
    await client.query("DELETE FROM backups WHERE database_id = ANY($1)", [ids]);
    await client.query("DELETE FROM databases WHERE id = ANY($1)", [ids]);
  }
  await client.query(
    `DELETE FROM backups WHERE id IN (SELECT id FROM backups WHERE deleted_at < ${old} LIMIT ${purgeBatch})`,
  );
  await client.query(
    `DELETE FROM branches WHERE id IN (SELECT b.id FROM branches b WHERE b.deleted_at < ${old}
       AND NOT EXISTS (SELECT 1 FROM databases d WHERE d.branch_id = b.id) LIMIT ${purgeBatch})`,
  );
  await client.query(
    `DELETE FROM projects WHERE id IN (SELECT p.id FROM projects p WHERE p.deleted_at < ${old}
       AND NOT EXISTS (SELECT 1 FROM databases d WHERE d.project_id = p.id)
       AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.project_id = p.id) LIMIT ${purgeBatch})`,
  );
  // Expired access tokens (every OAuth grant adds one): nothing refers to them. Refresh tokens stay: a spent one is
  // what detects its reuse.
  await client.query(
    `DELETE FROM tokens WHERE id IN (SELECT id FROM tokens WHERE kind = 'access' AND expires_at < ${old} LIMIT ${purgeBatch})`,
  );
  const { rows: jobs } = await client.query<{ id: string }>(
    `SELECT id FROM jobs WHERE finished_at < ${old} LIMIT ${purgeBatch}`,
  );
  if (jobs.length) {
    const jobIds = jobs.map((j) => j.id);
    await client.query("DELETE FROM job_runs WHERE job_id = ANY($1)", [jobIds]);
    await client.query("DELETE FROM jobs WHERE id = ANY($1)", [jobIds]);
  }
}

export function startScheduler(deps: ServiceDeps): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const tick = () => {
    running = runMaintenance(deps).catch((err: unknown) =>
      deps.logger.warn({ err: { message: (err as Error).message } }, "maintenance failed"),
    );
  };
  const timer = setInterval(tick, deps.config.backupScheduleIntervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
