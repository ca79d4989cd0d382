import { z } from "zod";
import { Region, regionIds } from "../../contract/index.ts";
import { RegionConfig, type ServerConfig } from "./region-config.ts";

export {
  defaultServerName,
  publicEndpoint,
  RegionConfig,
  ServerConfig,
  ServerName,
  type RegionInput,
  type RegionSettings,
} from "./region-config.ts";

export const ServiceConfig = z.strictObject({
  /** Control database (holds a password: never log it). */
  controlUrl: z.string().min(1),
  regions: z
    .partialRecord(Region, RegionConfig)
    .refine((r) => Object.keys(r).length > 0, { error: "at least one region needs a server" }),
  /** What clients reach; resources' `url` fields start with it. */
  baseUrl: z.url().transform((u) => u.replace(/\/+$/, "")),
  /** 32-byte key that encrypts stored creation responses (they hold credentials). */
  encryptionKey: z.instanceof(Buffer).refine((b) => b.length === 32, { error: "must be 32 bytes" }),
  /** Directory for pg_dump archives. */
  backupDir: z.string().min(1),
  backupRetentionDays: z.number().int().min(1).default(7),
  /** Manual backups (`POST …/backups`) one workspace may keep at once; past it a new one is 409 until old ones expire. */
  backupsPerWorkspace: z.number().int().min(1).default(100),
  /** Bytes of all kept backups (daily ones included) of one workspace past which a manual backup is 409. */
  backupBytesPerWorkspace: z
    .number()
    .int()
    .min(1)
    .default(50 * 1024 ** 3),
  /**
   * Live databases one workspace may have, all projects together; past it creating one (or a project with its default
   * database) is 409. Bounds what its daily backups (never refused) can take, and its first connections.
   */
  databasesPerWorkspace: z.number().int().min(1).default(1000),
  /** Live branches one project may have; past it creating one (also through a database's `branchGitName`) is 409. */
  branchesPerProject: z.number().int().min(1).default(100),
  /** Live branches one workspace may have, all projects together; past it creating one is 409. */
  branchesPerWorkspace: z.number().int().min(1).default(1000),
  /**
   * Days a deleted project, database, branch or backup (and a finished job) is kept before the maintenance pass
   * purges its row: ids are never reused meanwhile, and the control database does not grow without end.
   */
  deletedRowRetentionDays: z.number().int().min(1).default(30),
  /** Live connections (login roles) one workspace may have, all databases together; past it minting one is 409. */
  connectionsPerWorkspace: z.number().int().min(1).default(100),
  /**
   * Objects (table-of-contents entries: tables, functions, indexes…) a database's archive may list. Past it a backup,
   * restore or clone fails for good, naming this setting, rather than hold a tenant-sized listing in memory.
   */
  archiveEntryLimit: z.number().int().min(1).default(500_000),
  /**
   * Job attempts of one workspace that may fail in 24 hours (retried, given up, timed out or ended by a crash); past it
   * new backups, restores and databases from a source are 409, and its daily backups wait, until old failures age out.
   */
  failedJobAttemptsPerWorkspace: z.number().int().min(1).default(50),
  /**
   * How often the tenant guard (guard/tenant-guard.ts) looks at each region server: it puts back the database limits a
   * tenant changed and ends sessions past the connection limits or idle in a transaction too long.
   */
  tenantGuardIntervalMs: z.number().int().min(100).max(3_600_000).default(2000),
  /** How often to look for databases due for their daily backup and for expired backups. */
  backupScheduleIntervalMs: z
    .number()
    .int()
    .min(100)
    .default(10 * 60_000),
  /**
   * Empty databases kept ready per region server so provisioning renames one instead of running CREATE DATABASE: the
   * largest burst of creates that stays fast (placement/spares.ts). Each costs ~7.5 MB on the server.
   */
  spareDatabases: z.number().int().min(0).max(1000).default(64),
  jobConcurrency: z.number().int().min(1).max(32).default(4),
  jobPollIntervalMs: z.number().int().min(10).default(1000),
  jobMaxAttempts: z.number().int().min(1).default(5),
  /** Time limit of one job attempt: past it the attempt is aborted (pg_dump/pg_restore killed) and counts as failed. */
  jobTimeoutMs: z
    .number()
    .int()
    .min(100)
    .default(60 * 60_000),
  /** Jobs of one workspace running at once across all replicas: one workspace's stuck jobs never hold every worker. */
  /** Default: one less than `jobConcurrency` (at least 1), so one workspace alone keeps nearly full throughput. */
  jobsPerWorkspace: z.number().int().min(1).max(32).optional(),
  /**
   * pg_restore runs at once in a restore (or the restore half of a clone) of an archive of `restoreSplitMinBytes` or
   * more, as `pg_restore -j` (jobs/restore-plan.ts); at most the database's connection limit. 1: always one run.
   */
  restoreJobs: z.number().int().min(1).max(16).default(2),
  /** Below this archive size a restore is one pg_restore run: the split's extra logins and passes cost more than they save. */
  restoreSplitMinBytes: z
    .number()
    .int()
    .min(0)
    .default(16 * 1024 ** 2),
  /** How long the service's sessions (and pg_dump) wait for a lock a tenant holds before the attempt fails. */
  lockTimeoutMs: z.number().int().min(1).default(30_000),
  /** The API budget of one workspace, all its tokens together (tokens are free to mint, so a per-token budget was none). */
  rateLimit: z
    .strictObject({ perSecond: z.number().positive(), burst: z.number().int().min(1) })
    .default({ perSecond: 20, burst: 100 }),
  /** Per client address: every `/oauth/token` request and every failed authentication (guessing tokens, spraying). */
  authRateLimit: z
    .strictObject({ perSecond: z.number().positive(), burst: z.number().int().min(1) })
    .default({ perSecond: 1, burst: 30 }),
  accessTokenTtlSeconds: z.number().int().min(1).default(3600),
  instanceId: z.string().min(1).optional(),
});
export type ServiceConfig = z.infer<typeof ServiceConfig>;
export type ServiceConfigInput = z.input<typeof ServiceConfig>;

/**
 * Config issues as one line, each by its path (`regions.us-east-1.servers.0.name: …`). Values are never echoed (URLs
 * hold passwords); a key that is not a region says which ones are. `regionsAt`: the path of the regions record.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[], regionsAt = "regions"): string {
  return issues
    .map((i) => {
      const where = i.path.map(String).join(".");
      const what =
        i.code === "unrecognized_keys" && where === regionsAt
          ? `${i.message} (regions: ${regionIds.join(", ")})`
          : i.message;
      return where ? `${where}: ${what}` : what;
    })
    .join("; ");
}

/** Regions in the contract's order, keeping only those with a server. */
export function enabledRegions(config: ServiceConfig): Region[] {
  return regionIds.filter((r) => config.regions[r] !== undefined);
}

export type TenantLimits = Pick<
  RegionConfig,
  "loginConnectionLimit" | "databaseConnectionLimit" | "idleInTransactionTimeoutMs" | "workspaceConnectionLimit"
>;

/** The bounds every tenant login and database of `region` gets (every server of the region alike). */
export function tenantLimitsOf(config: ServiceConfig, region: string): TenantLimits {
  const r = config.regions[region as Region];
  if (!r) throw new Error(`region ${region} has no server`);
  return {
    loginConnectionLimit: r.loginConnectionLimit,
    databaseConnectionLimit: r.databaseConnectionLimit,
    idleInTransactionTimeoutMs: r.idleInTransactionTimeoutMs,
    workspaceConnectionLimit: r.workspaceConnectionLimit,
  };
}

export function lockTimeoutOf(config: ServiceConfig, region: string): number {
  return config.regions[region as Region]?.lockTimeoutMs ?? config.lockTimeoutMs;
}

/**
 * The configured server a database lives on. `server` null: a row written before databases recorded their server
 * (the service fills those in at start, see placement/servers.ts) or by an older replica meanwhile: the region's first server,
 * which was then its only one. Undefined when the region or the server is not configured.
 */
export function serverConfigOf(
  config: ServiceConfig,
  at: { region: string; server: string | null },
): ServerConfig | undefined {
  const servers = config.regions[at.region as Region]?.servers;
  return at.server === null ? servers?.[0] : servers?.find((s) => s.name === at.server);
}
