import type pg from "pg";
import type { Logger } from "pino";
import { findPostgresBinaries } from "../../postgres/index.ts";
import { createApp } from "./app.ts";
import { describeIssues, ServiceConfig, type ServiceConfigInput } from "../config/config.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { privateDirectory } from "../jobs/dump.ts";
import { jobHandlers } from "../jobs/handlers.ts";
import { JobRunner } from "../queue/jobs.ts";
import { createServiceLogger } from "../runtime/logger.ts";
import { createMetrics } from "../runtime/metrics.ts";
import { RateLimiter } from "../runtime/rate-limit.ts";
import { startScheduler } from "../jobs/scheduler.ts";
import { openServers, reconcileServers } from "../placement/servers.ts";
import { startSpareFiller } from "../placement/spares.ts";
import { startTenantGuard } from "../guard/tenant-guard.ts";
import { applyTenantLimits } from "../guard/tenant-limits.ts";
import { migrate } from "../store/migrate.ts";
import { createPool } from "../store/pool.ts";

// The service's wiring: pools, migrations, hardening, job workers, spares, the scheduler and the HTTP server.

export type StartServiceOptions = Omit<ServiceConfigInput, "baseUrl"> & {
  /** Defaults to http://<host>:<bound port>. */
  baseUrl?: string;
  host?: string;
  /** 0 or absent: a free port. */
  port?: number;
  logger?: Logger;
  /** Directory of pg_dump/pg_restore; found like the server binaries by default. */
  bindir?: string;
};

/**
 * Tenants' login roles must reach nothing but their own database: PUBLIC loses CONNECT on the maintenance
 * databases of every region server and on the control database (which may live on a region server).
 */
async function hardenServers(control: pg.Pool, regions: pg.Pool[], logger: Logger): Promise<void> {
  const revoke = (db: string) =>
    `DO $$ BEGIN EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', ${db}); END $$`;
  for (const p of regions) {
    for (const db of ["postgres", "template1"]) {
      await p
        .query(revoke(`'${db}'`))
        .catch((err: Error) =>
          logger.warn({ err: { message: err.message } }, "cannot revoke CONNECT on a maintenance database"),
        );
    }
  }
  await control
    .query(revoke("current_database()"))
    .catch((err: Error) =>
      logger.warn({ err: { message: err.message } }, "cannot revoke CONNECT on the control database"),
    );
}

export type RunningService = { url: string; deps: ServiceDeps; stop(): Promise<void> };

/** Runs the service: migrations, job workers, the daily-backup scheduler, and the HTTP server. */
export async function startService(options: StartServiceOptions): Promise<RunningService> {
  const { host = "127.0.0.1", port = 0, logger = createServiceLogger("info"), bindir, ...rest } = options;
  const parsed = ServiceConfig.safeParse({ ...rest, baseUrl: rest.baseUrl ?? "http://placeholder.invalid" });
  // A bad regions file reads as one clear line (never a stack, never a value: URLs hold passwords).
  if (!parsed.success) throw new Error(`invalid service configuration: ${describeIssues(parsed.error.issues)}`);
  const config = parsed.data;
  const pool = createPool(config.controlUrl, 20);
  const { servers, pools } = openServers(config);
  const cleanup = async () => {
    await pool.end().catch(() => {});
    for (const p of pools) await p.end().catch(() => {});
  };
  try {
    await migrate(pool);
    await reconcileServers(pool, config, logger);
    await hardenServers(pool, pools, logger);
    await applyTenantLimits({ config, control: pool, servers, logger });
    await privateDirectory(config.backupDir);
    // A job's claim is a row lock of one of these sessions: a replica that vanished releases its jobs within ~30 s.
    const lockPool = createPool(config.controlUrl, config.jobConcurrency + 1, { deadPeerSeconds: 30 });
    pools.push(lockPool);
    const metrics = createMetrics();
    const wake = { fn: () => {} };
    const deps: ServiceDeps = {
      config,
      pool,
      servers,
      bindir: bindir ?? (await findPostgresBinaries()).bindir,
      logger,
      wakeJobs: () => wake.fn(),
      metrics,
      rateLimiter: new RateLimiter(config.rateLimit),
      authLimiter: new RateLimiter(config.authRateLimit),
    };
    const runner = new JobRunner({
      pool,
      lockPool,
      handlers: jobHandlers(deps),
      concurrency: config.jobConcurrency,
      pollIntervalMs: config.jobPollIntervalMs,
      maxAttempts: config.jobMaxAttempts,
      timeoutMs: config.jobTimeoutMs,
      perWorkspace: config.jobsPerWorkspace ?? Math.max(1, config.jobConcurrency - 1),
      logger: logger.child({ component: "jobs" }),
      ...(config.instanceId ? { instanceId: config.instanceId } : {}),
    });
    wake.fn = () => runner.wake();
    const app = createApp(deps);
    await app.listen({ host, port });
    const address = app.server.address();
    const boundPort = typeof address === "object" && address ? address.port : port;
    const url = (rest.baseUrl ?? `http://${host.includes(":") ? `[${host}]` : host}:${boundPort}`).replace(/\/+$/, "");
    config.baseUrl = url;
    // Spares live on each server, where its own provision jobs rename them; a draining server gets no new databases.
    const accepting = [...servers.values()].flat().filter((s) => !s.config.draining);
    const spares = startSpareFiller({
      pools: [...new Set(accepting.map((s) => s.pool))],
      target: config.spareDatabases,
      logger,
      busy: () => runner.busy > 0,
    });
    wake.fn = () => {
      runner.wake();
      spares.wake();
    };
    runner.start();
    const gauge = setInterval(() => metrics.jobsRunning.set(runner.busy), 1000);
    gauge.unref();
    const scheduler = startScheduler(deps);
    const guard = startTenantGuard({ config, control: pool, servers, logger });
    // Server names only: an admin URL holds a password.
    const layout = Object.fromEntries(
      [...servers].map(([region, list]) => [
        region,
        list.map((s) => (s.config.draining ? `${s.name} (draining)` : s.name)),
      ]),
    );
    logger.info({ url, regions: [...servers.keys()], servers: layout }, "service listening");
    let stopping: Promise<void> | undefined;
    return {
      url,
      deps,
      stop() {
        stopping ??= (async () => {
          clearInterval(gauge);
          await app.close();
          await scheduler.stop();
          await guard.stop();
          await runner.stop();
          await spares.stop();
          await cleanup();
        })();
        return stopping;
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
