import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino, { type Logger } from "pino";
import { templateCluster } from "../../src/postgres/index.ts";
import { startEmbeddedService, type EmbeddedServiceOptions } from "../../src/service/embedded/stack.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";

export type TestService = {
  url: string;
  /** Token of workspace "default" with workspace:admin and offline_access. */
  token: string;
  createToken(workspace: string, scopes?: string[]): Promise<string>;
  /** The control database (superuser URL): tests read job history from it (see README, "Job history"). */
  controlUrl: string;
  /** The PostgreSQL server's superuser URL (the first server's, with `servers`). */
  postgresUrl: string;
  /** Every server of every region, in order: its name, superuser URL and port (see `servers` in the options). */
  servers: { name: string; postgresUrl: string; port: number }[];
  dir: string;
  stop(): Promise<void>;
};

export type TestServiceOptions = {
  /** Reuse a directory (e.g. to restart over the same data); default: a fresh temporary one, removed on stop. */
  dir?: string;
  logger?: Logger;
  service?: EmbeddedServiceOptions["service"];
  regionSettings?: EmbeddedServiceOptions["regionSettings"];
  /** Several PostgreSQL servers in every region (each with its own data directory, TLS and PgBouncer). */
  servers?: EmbeddedServiceOptions["servers"];
};

/**
 * One embedded PostgreSQL and service for a test file (about a second to start: the cluster is copied from a cached
 * template instead of running initdb). Durability settings are off: test data need not survive a power cut, and
 * fsync is the slowest part of provisioning.
 */
export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const dir = options.dir ?? (await mkdtemp(path.join(tmpdir(), "mds-service-")));
  let service: Awaited<ReturnType<typeof startEmbeddedService>>;
  try {
    service = await startEmbeddedService({ dir, ...(await testServiceOptions(options)) });
  } catch (err) {
    if (!options.dir) await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const pool = createPool(service.controlUrl, 2);
  return {
    url: service.url,
    token: service.token,
    controlUrl: service.controlUrl,
    postgresUrl: service.postgres.url,
    servers: service.servers.map((s) => ({ name: s.server.name, postgresUrl: s.postgres.url, port: s.postgres.port })),
    dir,
    async createToken(workspace, scopes) {
      return (await createServiceToken(pool, { workspace, ...(scopes ? { scopes } : {}), name: "test" })).token;
    },
    async stop() {
      await pool.end().catch(() => {});
      try {
        await service.stop();
      } finally {
        if (!options.dir) await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/** What startTestService gives startEmbeddedService besides the directory (the chaos stack starts it the same way). */
export async function testServiceOptions(
  options: Omit<TestServiceOptions, "dir"> = {},
): Promise<Omit<EmbeddedServiceOptions, "dir">> {
  return {
    port: 0,
    logger: options.logger ?? pino({ level: "silent" }),
    postgresSettings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
    postgresTemplate: await templateCluster(),
    ...(options.regionSettings ? { regionSettings: options.regionSettings } : {}),
    ...(options.servers ? { servers: options.servers } : {}),
    service: {
      rateLimit: { perSecond: 1000, burst: 1000 },
      authRateLimit: { perSecond: 1000, burst: 1000 },
      jobPollIntervalMs: 200,
      spareDatabases: 2,
      ...options.service,
    },
  };
}
