import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres, templateCluster, type RunningPostgres } from "../../postgres/index.ts";
import { migrate } from "../store/migrate.ts";
import { createPool } from "../store/pool.ts";
import { enqueueJob, JobRunner, type JobHandler } from "./jobs.ts";

// A job's claim is a row lock held by one session of the control database for the whole run. When that session dies
// (the control store fails over, a proxy cuts it), the lock is gone and another worker may claim the job: the run
// that lost it must stop, or the two would run one job at once.

let dir: string;
let postgres: RunningPostgres;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-jobs-"));
  postgres = await startPostgres({ dir, template: await templateCluster(), settings: { fsync: "off" } });
});
afterAll(async () => {
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("JobRunner", () => {
  it("aborts a run whose job lock's session died, and another claim runs the job again", async () => {
    const pool = createPool(postgres.url, 4);
    const lockPool = createPool(postgres.url, 2);
    await migrate(pool);
    const started: AbortSignal[] = [];
    const waiting: JobHandler = {
      async run(_job, ctx) {
        started.push(ctx.signal);
        // Stands for a long step (pg_restore): it ends early only when the signal says so.
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, started.length === 1 ? 20_000 : 0);
          ctx.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(ctx.signal.reason as Error);
          });
        });
      },
      async fail() {},
    };
    const runner = new JobRunner({
      pool,
      lockPool,
      handlers: { provision: waiting, backup: waiting, restore: waiting, drop: waiting },
      concurrency: 1,
      pollIntervalMs: 50,
      maxAttempts: 3,
      timeoutMs: 60_000,
      perWorkspace: 2,
      logger: pino({ level: "silent" }),
    });
    try {
      const id = await enqueueJob(pool, { kind: "backup", targetId: "db-1" });
      runner.start();
      await expect.poll(() => started.length, { timeout: 10_000 }).toBe(1);
      // The lock's session is the only one idle inside a transaction.
      const killer = new pg.Client({ connectionString: postgres.url });
      await killer.connect();
      const { rows } = await killer.query<{ ended: boolean }>(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()",
      );
      await killer.end();
      expect(rows).toEqual([{ ended: true }]);
      await expect.poll(() => started[0]!.aborted, { timeout: 5000 }).toBe(true);
      expect((started[0]!.reason as Error).message).toMatch(/lost the lock/);
      // The job is still pending (the lost claim changed nothing) and the next claim finishes it.
      await expect
        .poll(async () => (await pool.query("SELECT state FROM jobs WHERE id = $1", [id])).rows[0].state, {
          timeout: 10_000,
        })
        .toBe("done");
      expect(started).toHaveLength(2);
    } finally {
      await runner.stop();
      await pool.end();
      await lockPool.end();
    }
  });

  it("holds its locks on sessions whose server gives up on a vanished peer within 30 s", async () => {
    // A replica SIGKILLed closes its sockets and PostgreSQL ends its sessions at once (test/service/replica-kill); a
    // replica whose machine vanished sends nothing, and only keepalive probes end its sessions and free its jobs.
    const lockPool = createPool(postgres.url, 1, { deadPeerSeconds: 30 });
    try {
      const { rows } = await lockPool.query<{ idle: string; interval: string; count: string }>(
        "SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS interval, current_setting('tcp_keepalives_count') AS count",
      );
      expect(rows).toEqual([{ idle: "10", interval: "5", count: "4" }]);
    } finally {
      await lockPool.end();
    }
  });
});
