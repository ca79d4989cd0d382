import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres, templateCluster, type RunningPostgres } from "../../postgres/start-postgres.ts";
import { migrate } from "../store/migrate.ts";
import { createPool } from "../store/pool.ts";
import { enqueueJob, JobLimitError, JobRunner, type JobHandler, type JobKind } from "./jobs.ts";

// The job runner on a real control database of its own (no service competes for its jobs): what an attempt's
// outcome says, and that an exception a job lets escape ends that attempt and not the process.

describe("JobRunner", () => {
  let dir: string;
  let postgres: RunningPostgres;
  let pool: ReturnType<typeof createPool>;
  let lockPool: ReturnType<typeof createPool>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-jobs-"));
    postgres = await startPostgres({
      dir: path.join(dir, "pg"),
      template: await templateCluster(),
      settings: { fsync: "off" },
    });
    pool = createPool(postgres.url, 4);
    lockPool = createPool(postgres.url, 4);
    await migrate(pool);
  });
  afterAll(async () => {
    await pool?.end();
    await lockPool?.end();
    await postgres?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs one job of kind `drop` through `run`, as many attempts as it takes; returns each attempt's outcome. */
  async function outcomes(run: JobHandler["run"], maxAttempts = 3): Promise<{ runs: string[]; error: string }> {
    const failed: Error[] = [];
    const handler: JobHandler = { run, fail: async (_job, err) => void failed.push(err) };
    const runner = new JobRunner({
      pool,
      lockPool,
      handlers: { drop: handler } as Record<JobKind, JobHandler>,
      concurrency: 1,
      pollIntervalMs: 10,
      maxAttempts,
      timeoutMs: 10_000,
      perWorkspace: 1,
      logger: pino({ level: "silent" }),
    });
    const id = await enqueueJob(pool, { kind: "drop", targetId: `db_c${Date.now()}${Math.random()}` });
    // Backoff is skipped: each attempt is made due at once.
    for (let i = 0; i < maxAttempts * 4 + 1; i++) {
      await pool.query("UPDATE jobs SET run_after = now() WHERE id = $1", [id]);
      await runner.runOne();
      const { rows } = await pool.query<{ state: string }>("SELECT state FROM jobs WHERE id = $1", [id]);
      if (rows[0]!.state !== "pending") break;
    }
    const { rows } = await pool.query<{ outcome: string }>(
      "SELECT outcome FROM job_runs WHERE job_id = $1 ORDER BY id",
      [id],
    );
    const { rows: job } = await pool.query<{ error: string }>("SELECT error FROM jobs WHERE id = $1", [id]);
    return { runs: rows.map((r) => r.outcome), error: job[0]!.error };
  }

  it("fails a job that went past a limit at once, and marks a retry for want of PostgreSQL as unavailable", async () => {
    expect(
      await outcomes(async () => {
        throw new JobLimitError("past the limit");
      }),
    ).toEqual({ runs: ["failed"], error: "past the limit" });
    expect(
      await outcomes(async () => {
        throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
      }),
    ).toEqual({
      // PostgreSQL out of reach uses up no attempt, only the ceiling of runs (4 × the attempts): a failover of
      // minutes does not fail a database a client was told is being created.
      runs: [...Array<string>(11).fill("unavailable"), "failed"],
      error: "connect ECONNREFUSED 127.0.0.1:1",
    });
    expect(
      await outcomes(async () => {
        throw new Error("lock timeout");
      }),
    ).toEqual({ runs: ["retry", "retry", "failed"], error: "lock timeout" });
  });

  it("ends an attempt whose callback threw outside its promises, at once and for good; the process goes on", async () => {
    // The runner's own listener alone, as in `mds service` (vitest's would report the planted throw as a failure);
    // a started runner installs it. Without workers: one would race outcomes() for the job (and has no handler).
    const others = process.listeners("uncaughtException");
    process.removeAllListeners("uncaughtException");
    const runner = new JobRunner({
      pool,
      lockPool,
      handlers: {} as Record<JobKind, JobHandler>,
      concurrency: 0,
      pollIntervalMs: 60_000,
      maxAttempts: 1,
      timeoutMs: 1000,
      perWorkspace: 1,
      logger: pino({ level: "silent" }),
    });
    runner.start();
    try {
      const result = await outcomes(
        (_job, ctx) =>
          new Promise<void>((resolve) => {
            // Never settles on its own: a stream whose listener threw never delivers its end.
            setTimeout(() => {
              throw new RangeError("Invalid string length");
            }, 10);
            ctx.signal.addEventListener("abort", () => setTimeout(resolve, 5_000).unref());
          }),
      );
      expect(result).toEqual({
        runs: ["failed"],
        error: "the job failed on an unexpected error: Invalid string length",
      });
      expect(process.listenerCount("uncaughtException")).toBe(1);
    } finally {
      await runner.stop();
      for (const listener of others) process.on("uncaughtException", listener);
    }
  });
});
