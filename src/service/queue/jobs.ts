import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { Logger } from "pino";
import { isUnavailable } from "../shared/errors.ts";
import { inTransaction } from "../store/pool.ts";

export type JobKind = "provision" | "backup" | "restore" | "drop";
export type Job = {
  id: string;
  kind: JobKind;
  target_id: string;
  payload: Record<string, unknown>;
  idempotency_key: string | null;
};

/** A failure that retrying cannot fix: the job fails at once. */
export class JobFatalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "JobFatalError";
  }
}

/**
 * A job that went past one of the service's documented limits (the size of what a tenant's database holds): it failed
 * for good, as retrying would only meet the same limit again.
 */
export class JobLimitError extends JobFatalError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "JobLimitError";
  }
}

/** What threw outside the job's own promises (in a stream's callback, a timer, an unhandled rejection) and so ended it. */
class JobCrashError extends JobFatalError {
  constructor(cause: unknown) {
    const message = cause instanceof Error ? cause.message : String(cause);
    super(`the job failed on an unexpected error: ${message.slice(0, 500)}`, { cause });
    this.name = "JobCrashError";
  }
}

// Every attempt runs in an async context that knows how to end it. An exception nothing caught (a stream callback of
// pg_dump's pipes that threw, say) still carries the context of the attempt it began in: it ends that attempt, not
// the process, so one tenant's job can never take the API down for every workspace.
const attemptScope = new AsyncLocalStorage<{ crash(err: unknown): void }>();
let contained = 0;

function onUncaught(err: unknown): void {
  const attempt = attemptScope.getStore();
  if (attempt) return attempt.crash(err);
  // Not a job's: as Node itself would, unless someone else (a test runner) listens and decides.
  if (process.listenerCount("uncaughtException") > 1) return;
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}

/** While a runner is started: uncaught exceptions of its jobs end their attempt (above). */
function containJobCrashes(): () => void {
  if (contained++ === 0) process.on("uncaughtException", onUncaught);
  return () => {
    if (--contained === 0) process.off("uncaughtException", onUncaught);
  };
}

/**
 * `outcome` says what this attempt did; with `durable` it is written at once (e.g. "restored", which must survive a
 * crash right after), otherwise with the end of the run.
 */
type JobContext = {
  attempt: number;
  runId: string;
  outcome(text: string, options?: { durable?: boolean }): Promise<void>;
  /** Aborted when the attempt passes its time limit: kill child processes, stop between steps. */
  signal: AbortSignal;
};
export type JobHandler = {
  run(job: Job, ctx: JobContext): Promise<void>;
  /** Called once when the job is given up: leave a clean, visible state (e.g. status `failure`), never a half one. */
  fail(job: Job, err: Error): Promise<void>;
};

type JobRunnerOptions = {
  pool: pg.Pool;
  /** Connections that hold job locks for whole runs: one per worker. */
  lockPool: pg.Pool;
  handlers: Record<JobKind, JobHandler>;
  concurrency: number;
  pollIntervalMs: number;
  maxAttempts: number;
  /** Time limit of one attempt. */
  timeoutMs: number;
  /** Jobs of one workspace running at once, across every replica. */
  perWorkspace: number;
  logger: Logger;
  instanceId?: string;
};

export async function enqueueJob(
  db: Pick<pg.Pool, "query">,
  input: { kind: JobKind; targetId: string; payload?: Record<string, unknown>; idempotencyKey?: string | null },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    "INSERT INTO jobs (kind, target_id, payload, idempotency_key) VALUES ($1, $2, $3, $4) RETURNING id",
    [input.kind, input.targetId, JSON.stringify(input.payload ?? {}), input.idempotencyKey ?? null],
  );
  return rows[0]!.id;
}

// Pending jobs whose target has no older pending job (jobs of one database run in order, one at a time), fairly
// across workspaces: every workspace's oldest job first, then every workspace's second, and so on. Some may be held by
// live workers (they are skipped when locked). A pending row we can lock whose run was started is a run whose worker died.
const candidatesSql = `
  SELECT j.id, coalesce(d.workspace_id, '') AS workspace FROM jobs j LEFT JOIN databases d ON d.id = j.target_id
  WHERE j.state = 'pending' AND j.run_after <= now()
    AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.target_id = j.target_id AND o.state = 'pending' AND o.id < j.id)
  ORDER BY row_number() OVER (PARTITION BY d.workspace_id ORDER BY j.id), j.id
  LIMIT 32`;

const lockJobSql = `
  SELECT id, kind, target_id, payload, idempotency_key FROM jobs j
  WHERE id = $1 AND state = 'pending' AND run_after <= now()
    AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.target_id = j.target_id AND o.state = 'pending' AND o.id < j.id)
  FOR UPDATE SKIP LOCKED`;

// A workspace's running jobs hold its "slots": advisory locks (7221100 + slot number, hashtext(workspace)) taken in the
// job's lock transaction, so they vanish with a dead worker's session like the job lock itself. Workspaces whose names
// hash alike share slots (harmless: they only wait a little more).
const slotBase = 7_221_100;
const takeSlotSql = `SELECT s FROM generate_series(0, $2::int - 1) s WHERE pg_try_advisory_xact_lock(${slotBase} + s, hashtext($1)) LIMIT 1`;

class JobTimeoutError extends Error {
  constructor(ms: number) {
    super(`job attempt exceeded its time limit of ${Math.round(ms / 1000)} s`);
    this.name = "JobTimeoutError";
  }
}

class JobLockLostError extends Error {
  constructor() {
    super("job attempt lost the lock on its job: the control database session that held it ended");
    this.name = "JobLockLostError";
  }
}

export class JobRunner {
  readonly instanceId: string;
  private readonly options: JobRunnerOptions;
  private stopped = false;
  private readonly workers: Promise<void>[] = [];
  private wakeUp: (() => void)[] = [];
  private running = 0;
  private release = () => {};

  constructor(options: JobRunnerOptions) {
    this.options = options;
    this.instanceId = options.instanceId ?? randomUUID();
  }

  start(): void {
    this.release = containJobCrashes();
    for (let i = 0; i < this.options.concurrency; i++) this.workers.push(this.work());
  }

  /**
   * New work was enqueued: one idle worker looks now instead of at the next poll. One, not all: every woken worker
   * runs the claim query, and all but one find nothing, which on two cores cost a create ~4 ms at its p50.
   * A worker that finishes a job looks again at once, so a burst still reaches every worker.
   */
  wake(): void {
    this.wakeUp.shift()?.();
  }

  get busy(): number {
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.wakeUp.splice(0)) w();
    await Promise.all(this.workers);
    this.release();
    this.release = () => {};
  }

  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = this.wakeUp.filter((w) => w !== done);
        resolve();
      };
      const timer = setTimeout(done, this.options.pollIntervalMs);
      this.wakeUp.push(done);
    });
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      let didWork = false;
      try {
        didWork = await this.runOne();
      } catch (err) {
        this.options.logger.warn({ err: { message: (err as Error).message } }, "job worker error");
      }
      if (!didWork && !this.stopped) await this.idle();
    }
  }

  /** Locks the first candidate whose workspace has a free slot; the slot and the row lock last until COMMIT. */
  private async claim(client: pg.PoolClient): Promise<Job | undefined> {
    const { rows: candidates } = await client.query<{ id: string; workspace: string }>(candidatesSql);
    for (const candidate of candidates) {
      // A rolled-back savepoint releases what it took: the slot of a job someone else holds.
      await client.query("SAVEPOINT claim");
      const slot = await client.query(takeSlotSql, [candidate.workspace, this.options.perWorkspace]);
      const { rows } = slot.rowCount ? await client.query<Job>(lockJobSql, [candidate.id]) : { rows: [] };
      if (rows[0]) {
        await client.query("RELEASE SAVEPOINT claim");
        return rows[0];
      }
      await client.query("ROLLBACK TO SAVEPOINT claim");
    }
    return undefined;
  }

  /** Claims one job and runs it while holding its row lock. Returns false when there was nothing to do. */
  async runOne(): Promise<boolean> {
    const { pool, lockPool, handlers, logger, maxAttempts, timeoutMs } = this.options;
    // The job's row lock and its workspace slot live as long as this transaction (see claim).
    return inTransaction(lockPool, async (client) => {
      const job = await this.claim(client);
      if (!job) return false;
      this.running++;
      try {
        // Counted outside the lock's transaction, so a crash mid-run still counts as an attempt.
        const run = await pool.query<{ id: string; attempts: string; runs: string }>(
          `WITH r AS (INSERT INTO job_runs (job_id, instance) VALUES ($1, $2) RETURNING id)
           SELECT (SELECT id FROM r) AS id,
                  (SELECT count(*) FROM job_runs WHERE job_id = $1 AND outcome IS DISTINCT FROM 'unavailable') + 1 AS attempts,
                  (SELECT count(*) FROM job_runs WHERE job_id = $1) + 1 AS runs`,
          [job.id, this.instanceId],
        );
        const runId = run.rows[0]!.id;
        // Attempts that found PostgreSQL out of reach (a failover, a restart) are the platform's, not the job's: they
        // do not use up its attempts, only a ceiling of runs, so a job outlives an outage of minutes.
        const attempt = Number(run.rows[0]!.attempts);
        const runs = Number(run.rows[0]!.runs);
        const maxRuns = maxAttempts * 4;
        const log = logger.child({ job: job.id, kind: job.kind, target: job.target_id, attempt });
        let outcome = "";
        const handler = handlers[job.kind];
        try {
          if (attempt > maxAttempts) throw new JobFatalError(`gave up after ${maxAttempts} attempts`);
          if (runs > maxRuns) throw new JobFatalError(`gave up after ${maxRuns} runs`);
          log.debug("job started");
          const deadline = new AbortController();
          const timer = setTimeout(() => deadline.abort(new JobTimeoutError(timeoutMs)), timeoutMs);
          // An uncaught exception of this attempt aborts it (its programs are killed) and ends it at once: the stream
          // that threw may never deliver the event the handler waits for. It is not retried: it would throw again.
          const crashed = new AbortController();
          const crash = Promise.withResolvers<never>();
          crash.promise.catch(() => {});
          const scope = {
            crash: (err: unknown) => {
              if (crashed.signal.aborted) return log.warn({ err: { message: String(err) } }, "ended job threw again");
              log.error({ err: { message: err instanceof Error ? err.message : String(err) } }, "job threw");
              const error = new JobCrashError(err);
              crashed.abort(error);
              crash.reject(error);
            },
          };
          const signal = AbortSignal.any([deadline.signal, crashed.signal]);
          // The claim lives in this session: once it is gone (a failover of the control database), another worker
          // can claim the job, so this run stops where it would stop at its time limit.
          const lost = () => deadline.abort(new JobLockLostError());
          client.once("end", lost);
          try {
            await attemptScope.run(scope, () =>
              Promise.race([
                handler.run(job, {
                  attempt,
                  runId,
                  signal,
                  outcome: async (text, options) => {
                    outcome = text;
                    if (options?.durable)
                      await pool.query("UPDATE job_runs SET outcome = $2 WHERE id = $1", [runId, text]);
                  },
                }),
                crash.promise,
              ]),
            );
          } catch (err) {
            // Whatever the aborted step threw (a killed pg_restore, an AbortError), the cause is the abort's.
            throw signal.aborted ? (signal.reason as Error) : err;
          } finally {
            clearTimeout(timer);
            client.off("end", lost);
          }
          // The run's record commits with the job's: one flush. Nobody else touches this job_runs row.
          await client.query("UPDATE jobs SET state = 'done', finished_at = now() WHERE id = $1", [job.id]);
          await client.query("UPDATE job_runs SET finished_at = now(), outcome = $2 WHERE id = $1", [
            runId,
            outcome || "done",
          ]);
          log.debug("job done");
        } catch (err) {
          const error = err instanceof Error ? err : new Error(String(err));
          const fatal =
            error instanceof JobFatalError || (isUnavailable(error) ? runs >= maxRuns : attempt >= maxAttempts);
          log.warn({ err: { message: error.message } }, fatal ? "job failed" : "job attempt failed, will retry");
          if (fatal) {
            await handler.fail(job, error);
            await client.query("UPDATE jobs SET state = 'failed', error = $2, finished_at = now() WHERE id = $1", [
              job.id,
              error.message.slice(0, 2000),
            ]);
          } else {
            const backoffMs = Math.min(30_000, 250 * 2 ** attempt);
            await client.query(
              "UPDATE jobs SET run_after = now() + $2 * interval '1 millisecond', error = $3 WHERE id = $1",
              [job.id, backoffMs, error.message.slice(0, 2000)],
            );
          }
          // "unavailable": PostgreSQL out of reach, the platform's fault, not the workspace's (domain/job-budget.ts).
          const ended =
            error instanceof JobTimeoutError
              ? "timed-out"
              : fatal
                ? "failed"
                : isUnavailable(error)
                  ? "unavailable"
                  : "retry";
          await client.query("UPDATE job_runs SET finished_at = now(), outcome = $2 WHERE id = $1", [
            runId,
            outcome || ended,
          ]);
        }
        return true;
      } finally {
        this.running--;
      }
    });
  }
}
