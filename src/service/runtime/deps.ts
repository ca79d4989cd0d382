import type pg from "pg";
import type { Logger } from "pino";
import type { ServiceConfig } from "../config/config.ts";
import { JobFatalError } from "../queue/jobs.ts";
import type { Metrics } from "./metrics.ts";
import type { RateLimiter } from "./rate-limit.ts";
import { serverOf, type RegionServers, type ServerRef } from "../placement/servers.ts";

/** Everything the HTTP app and the job handlers need; built by startService (or a test). */
export type ServiceDeps = {
  config: ServiceConfig;
  /** The control database. */
  pool: pg.Pool;
  /** The servers of each region, in the regions file's order, with superuser pools (regions on one server share a pool). */
  servers: RegionServers;
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

/** The superuser pool of the server a database lives on. */
export function serverPool(deps: Pick<ServiceDeps, "servers">, at: ServerRef): pg.Pool {
  return serverOf(deps, at).pool;
}

/** The superuser URL of a database's server, for pg_dump and pg_restore in jobs. */
export function adminUrlOf(deps: Pick<ServiceDeps, "servers">, at: ServerRef): string {
  try {
    return serverOf(deps, at).config.adminUrl;
  } catch (err) {
    throw new JobFatalError((err as Error).message, { cause: err });
  }
}
