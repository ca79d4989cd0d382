import type pg from "pg";
import type { Logger } from "pino";
import type { Region } from "../contract/index.ts";
import type { ServiceConfig } from "./config.ts";
import { ServiceError } from "./errors.ts";
import { JobFatalError } from "./jobs.ts";
import type { Metrics } from "./metrics.ts";
import type { RateLimiter } from "./rate-limit.ts";

/** Everything the HTTP app and the job handlers need; built by startService (or a test). */
export type ServiceDeps = {
  config: ServiceConfig;
  /** The control database. */
  pool: pg.Pool;
  /** Superuser pools of the region servers (regions on one server share a pool). */
  regionPools: Map<Region, pg.Pool>;
  /** Where pg_dump and pg_restore live. */
  bindir: string;
  logger: Logger;
  /** Called after a transaction that enqueued jobs commits. */
  wakeJobs(): void;
  metrics: Metrics;
  /** The API budget, by workspace. */
  rateLimiter: RateLimiter;
  /** Authentication attempts, by client address. */
  authLimiter: RateLimiter;
};

export function regionPool(deps: Pick<ServiceDeps, "regionPools">, region: string): pg.Pool {
  const pool = deps.regionPools.get(region as Region);
  if (!pool) throw new ServiceError("region_unavailable", `region "${region}" has no PostgreSQL server`, "use one of the regions this service runs");
  return pool;
}

/** The superuser URL of a region's server, for pg_dump and pg_restore in jobs. */
export function adminUrlOf(deps: Pick<ServiceDeps, "config">, region: string): string {
  const r = deps.config.regions[region as Region];
  if (!r) throw new JobFatalError(`region ${region} has no server`);
  return r.adminUrl;
}
