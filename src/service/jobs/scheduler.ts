import { rm } from "node:fs/promises";
import type { ServiceDeps } from "../runtime/deps.ts";
import { insertBackup } from "../domain/backups.ts";
import { inTransaction } from "../store/pool.ts";

const schedulerLock = 7_221_002;

/**
 * One maintenance pass: a daily backup for every ready database without one in the last 24 h, backups past
 * retention removed (archive and row), expired idempotency records deleted. Replicas take turns through a lock.
 */
export async function runMaintenance(deps: ServiceDeps): Promise<{ scheduled: number; expired: number }> {
  const result = await inTransaction(deps.pool, async (client) => {
    const { rows: lock } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_xact_lock($1) AS ok", [
      schedulerLock,
    ]);
    if (!lock[0]?.ok) return { scheduled: 0, expired: [] as { id: string; path: string | null }[] };
    const { rows: due } = await client.query<{ id: string }>(
      `SELECT d.id FROM databases d WHERE d.deleted_at IS NULL AND d.status = 'ready'
         AND NOT EXISTS (SELECT 1 FROM backups b WHERE b.database_id = d.id AND b.deleted_at IS NULL
                         AND (b.status = 'running' OR (b.status = 'completed' AND b.created_at > now() - interval '24 hours')))
       ORDER BY d.created_at LIMIT 1000`,
    );
    for (const d of due) await insertBackup(client, d.id, "daily");
    const { rows: expired } = await client.query<{ id: string; path: string | null }>(
      `UPDATE backups SET deleted_at = now() WHERE deleted_at IS NULL AND status <> 'running'
         AND created_at < now() - $1 * interval '1 day' RETURNING id, path`,
      [deps.config.backupRetentionDays],
    );
    await client.query("DELETE FROM idempotency WHERE expires_at < now()");
    return { scheduled: due.length, expired };
  });
  for (const b of result.expired) if (b.path) await rm(b.path, { force: true });
  if (result.scheduled > 0) deps.wakeJobs();
  return { scheduled: result.scheduled, expired: result.expired.length };
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
