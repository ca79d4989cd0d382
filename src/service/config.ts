import { z } from "zod";
import { Region, regionIds } from "../contract/index.ts";

const HostPort = z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65535) });

const SslMode = z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]);
/** Modes that may fall back to (or never try) an encrypted connection: for loopback servers only. */
const plaintextModes: readonly string[] = ["disable", "allow", "prefer"];

/** 127.0.0.0/8, ::1 and localhost: traffic that never leaves the machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** One region = one PostgreSQL server. `adminUrl` holds a superuser password: never log it. */
export const RegionConfig = z
  .strictObject({
    adminUrl: z.string().min(1),
    /** What clients reach (defaults to the admin URL's host and port). */
    host: z.string().min(1).optional(),
    port: z.number().int().min(1).max(65535).optional(),
    /**
     * `sslmode` of returned connection strings. Default: `disable` for a loopback host, `require` otherwise; a host
     * that is not loopback refuses `disable`, `allow` and `prefer` (a password must not cross a network in clear).
     */
    sslmode: SslMode.optional(),
    /** PEM of the CA that signed the server's (and the pooler's) certificate, for clients that verify (`service.json`). */
    caCert: z.string().min(1).optional(),
    /**
     * A path to that CA on the clients' machine, added to connection strings as `sslrootcert=` (libpq then checks the
     * CA, the `pg` driver the CA and the host). Only when clients share the service's filesystem (the embedded stack).
     */
    sslrootcert: z.string().min(1).optional(),
    /** The `pooled` endpoint. `pgbouncer` (default true): a transaction-mode PgBouncer older than 1.21, so pooled connection strings carry `pgbouncer=true` (Prisma then uses no named prepared statements); false for 1.21+ with `max_prepared_statements`, or another pooler. */
    pooler: z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65535), pgbouncer: z.boolean().default(true) }).optional(),
    accelerate: HostPort.optional(),
    /** This server's bound on lock waits of the service's sessions (default: the service's `lockTimeoutMs`). */
    lockTimeoutMs: z.number().int().min(1).optional(),
    // Tenant limits (see tenant-limits.ts): one tenant must not take every connection slot of a shared server.
    /** Sessions one tenant login may hold at once (the role's CONNECTION LIMIT). */
    loginConnectionLimit: z.number().int().min(1).max(10_000).default(20),
    /** Sessions all logins of one tenant database may hold together (the database's CONNECTION LIMIT). */
    databaseConnectionLimit: z.number().int().min(1).max(10_000).default(40),
    /** A tenant session idle inside an open transaction longer than this is ended (0: never). Tenants may lower it. */
    idleInTransactionTimeoutMs: z.number().int().min(0).max(2_147_483_647).default(60_000),
  })
  .superRefine((r, ctx) => {
    const hosts = [clientHost(r), ...(r.pooler ? [r.pooler.host] : [])].filter((h): h is string => h !== undefined);
    const remote = hosts.find((h) => !isLoopbackHost(h));
    if (remote !== undefined && r.sslmode !== undefined && plaintextModes.includes(r.sslmode)) {
      ctx.addIssue({
        code: "custom",
        path: ["sslmode"],
        message: `sslmode "${r.sslmode}" lets passwords cross the network in clear: clients reach ${remote}, which is not a loopback address; use require, verify-ca or verify-full (and serve TLS on that server)`,
      });
    }
  })
  .transform((r) => ({ ...r, sslmode: r.sslmode ?? (isLoopbackHost(clientHost(r) ?? "localhost") && (!r.pooler || isLoopbackHost(r.pooler.host)) ? "disable" : "require") }));

/** The host clients reach (undefined when the admin URL does not parse: the URL is checked where it is used). */
function clientHost(r: { host?: string | undefined; adminUrl: string }): string | undefined {
  if (r.host) return r.host;
  try {
    return new URL(r.adminUrl).hostname || undefined;
  } catch {
    return undefined;
  }
}
export type RegionConfig = z.infer<typeof RegionConfig>;
/** What a region's settings may override in `mds service --embedded` (all regions share one server there). */
export type RegionSettings = Partial<Omit<z.input<typeof RegionConfig>, "adminUrl">>;

export const ServiceConfig = z.strictObject({
  /** Control database (holds a password: never log it). */
  controlUrl: z.string().min(1),
  regions: z.partialRecord(Region, RegionConfig).refine((r) => Object.keys(r).length > 0, { error: "at least one region needs a server" }),
  /** What clients reach; resources' `url` fields start with it. */
  baseUrl: z.url().transform((u) => u.replace(/\/+$/, "")),
  /** 32-byte key that encrypts stored creation responses (they hold credentials). */
  encryptionKey: z.instanceof(Buffer).refine((b) => b.length === 32, { error: "must be 32 bytes" }),
  /** Directory for pg_dump archives. */
  backupDir: z.string().min(1),
  backupRetentionDays: z.number().int().min(1).default(7),
  /** How often to look for databases due for their daily backup and for expired backups. */
  backupScheduleIntervalMs: z.number().int().min(100).default(10 * 60_000),
  /** Empty databases kept ready per region server so provisioning renames one instead of running CREATE DATABASE. */
  spareDatabases: z.number().int().min(0).max(64).default(4),
  jobConcurrency: z.number().int().min(1).max(32).default(4),
  jobPollIntervalMs: z.number().int().min(10).default(1000),
  jobMaxAttempts: z.number().int().min(1).default(5),
  /** Time limit of one job attempt: past it the attempt is aborted (pg_dump/pg_restore killed) and counts as failed. */
  jobTimeoutMs: z.number().int().min(100).default(60 * 60_000),
  /** Jobs of one workspace running at once across all replicas: one workspace's stuck jobs never hold every worker. */
  /** Default: one less than `jobConcurrency` (at least 1), so one workspace alone keeps nearly full throughput. */
  jobsPerWorkspace: z.number().int().min(1).max(32).optional(),
  /** How long the service's sessions (and pg_dump) wait for a lock a tenant holds before the attempt fails. */
  lockTimeoutMs: z.number().int().min(1).default(30_000),
  /** The API budget of one workspace, all its tokens together (tokens are free to mint, so a per-token budget was none). */
  rateLimit: z.strictObject({ perSecond: z.number().positive(), burst: z.number().int().min(1) }).default({ perSecond: 20, burst: 100 }),
  /** Per client address: every `/oauth/token` request and every failed authentication (guessing tokens, spraying). */
  authRateLimit: z.strictObject({ perSecond: z.number().positive(), burst: z.number().int().min(1) }).default({ perSecond: 1, burst: 30 }),
  accessTokenTtlSeconds: z.number().int().min(1).default(3600),
  instanceId: z.string().min(1).optional(),
});
export type ServiceConfig = z.infer<typeof ServiceConfig>;
export type ServiceConfigInput = z.input<typeof ServiceConfig>;

/** Regions in the contract's order, keeping only those with a server. */
export function enabledRegions(config: ServiceConfig): Region[] {
  return regionIds.filter((r) => config.regions[r] !== undefined);
}

export type TenantLimits = Pick<RegionConfig, "loginConnectionLimit" | "databaseConnectionLimit" | "idleInTransactionTimeoutMs">;

/** The bounds every tenant login and database of `region` gets. */
export function tenantLimitsOf(config: ServiceConfig, region: string): TenantLimits {
  const r = config.regions[region as Region];
  if (!r) throw new Error(`region ${region} has no server`);
  return { loginConnectionLimit: r.loginConnectionLimit, databaseConnectionLimit: r.databaseConnectionLimit, idleInTransactionTimeoutMs: r.idleInTransactionTimeoutMs };
}

export function lockTimeoutOf(config: ServiceConfig, region: string): number {
  return config.regions[region as Region]?.lockTimeoutMs ?? config.lockTimeoutMs;
}

/** Public host and port of a region (the admin URL's by default). */
export function publicEndpoint(region: RegionConfig): { host: string; port: number } {
  const url = new URL(region.adminUrl);
  return { host: region.host ?? url.hostname, port: region.port ?? (url.port ? Number(url.port) : 5432) };
}
