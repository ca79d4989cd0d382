import { z } from "zod";

// A region's PostgreSQL servers, as the regions file writes them. Two shapes, one result:
//   - the original one, a region IS one server: `{ adminUrl, host?, …, loginConnectionLimit?, … }`;
//   - `{ servers: [{ name, adminUrl, …, maxDatabases?, draining? }, …], loginConnectionLimit?, … }`.
// Both become `{ servers: [...], <region settings> }`, so the rest of the service knows one shape only. The shape is
// chosen by the `servers` key before validation (a zod union would answer "Invalid input" for any mistake in either).

const HostPort = z.strictObject({ host: z.string().min(1), port: z.number().int().min(1).max(65535) });

const SslMode = z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]);
/** Modes that may fall back to (or never try) an encrypted connection: for loopback servers only. */
const plaintextModes: readonly string[] = ["disable", "allow", "prefer"];

/** 127.0.0.0/8, ::1 and localhost: traffic that never leaves the machine. */
function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The admin URL, parsed; undefined when it is not a postgres URL. Never echo it: it holds a superuser password. */
function parseAdminUrl(adminUrl: string): URL | undefined {
  try {
    const url = new URL(adminUrl);
    return (url.protocol === "postgresql:" || url.protocol === "postgres:") && url.hostname ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The name recorded in the control store for each database: renaming a server in the file orphans its databases. */
export const ServerName = z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, {
  error: "a server name is 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit",
});

/** Name of the one server of a region written in the original shape (what a `servers` list must call it to keep its databases). */
export const defaultServerName = "default";

/** How clients and the service reach one server. `adminUrl` holds a superuser password: never log it. */
const serverFields = {
  adminUrl: z
    .string()
    .min(1)
    .refine((u) => parseAdminUrl(u) !== undefined, {
      error:
        "adminUrl must be a postgresql://user:password@host:port/database URL (its text is not shown: it holds a password)",
    }),
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
  pooler: z
    .strictObject({
      host: z.string().min(1),
      port: z.number().int().min(1).max(65535),
      pgbouncer: z.boolean().default(true),
    })
    .optional(),
  accelerate: HostPort.optional(),
  /** Databases this region may place on the server (absent: no bound). Placement prefers the server with the most room. */
  maxDatabases: z
    .number()
    .int()
    .min(1, { error: "maxDatabases must be at least 1 (to stop new databases on a server, set draining: true)" })
    .optional(),
  /** Takes no new databases; the ones on it keep being served (connections, backups, restores, deletion). */
  draining: z.boolean().default(false),
};

/** Settings of the region as a whole (every server of it). */
const regionFields = {
  /** This region's bound on lock waits of the service's sessions (default: the service's `lockTimeoutMs`). */
  lockTimeoutMs: z.number().int().min(1).optional(),
  // Tenant limits (see guard/tenant-limits.ts): one tenant must not take every connection slot of a shared server.
  /** Sessions one tenant login may hold at once (the role's CONNECTION LIMIT). */
  loginConnectionLimit: z.number().int().min(1).max(10_000).default(20),
  /** Sessions all logins of one tenant database may hold together (the database's CONNECTION LIMIT). */
  databaseConnectionLimit: z.number().int().min(1).max(10_000).default(40),
  /** A tenant session idle inside an open transaction longer than this is ended (0: never). Tenants may lower it. */
  idleInTransactionTimeoutMs: z.number().int().min(0).max(2_147_483_647).default(60_000),
  /** Sessions all logins of all databases of one workspace may hold together on one server (the tenant guard ends the newest past it). */
  workspaceConnectionLimit: z.number().int().min(1).max(100_000).default(100),
};

type ServerFields = {
  adminUrl: string;
  host?: string | undefined;
  sslmode?: string | undefined;
  pooler?: { host: string } | undefined;
};

/** The host clients reach (undefined when the admin URL does not parse: that has its own error). */
function clientHost(s: ServerFields): string | undefined {
  return s.host ?? parseAdminUrl(s.adminUrl)?.hostname;
}

function checkSslmode(s: ServerFields, ctx: z.RefinementCtx): void {
  const hosts = [clientHost(s), ...(s.pooler ? [s.pooler.host] : [])].filter((h): h is string => h !== undefined);
  const remote = hosts.find((h) => !isLoopbackHost(h));
  if (remote !== undefined && s.sslmode !== undefined && plaintextModes.includes(s.sslmode)) {
    ctx.addIssue({
      code: "custom",
      path: ["sslmode"],
      message: `sslmode "${s.sslmode}" lets passwords cross the network in clear: clients reach ${remote}, which is not a loopback address; use require, verify-ca or verify-full (and serve TLS on that server)`,
    });
  }
}

function defaultSslmode<T extends ServerFields & { sslmode?: z.infer<typeof SslMode> | undefined }>(s: T) {
  const loopback = isLoopbackHost(clientHost(s) ?? "localhost") && (!s.pooler || isLoopbackHost(s.pooler.host));
  return { ...s, sslmode: s.sslmode ?? (loopback ? ("disable" as const) : ("require" as const)) };
}

/** One PostgreSQL server of a region. */
export const ServerConfig = z
  .strictObject({ name: ServerName, ...serverFields })
  .superRefine(checkSslmode)
  .transform(defaultSslmode);
export type ServerConfig = z.infer<typeof ServerConfig>;

/** The original shape: the region is one server (named `default`). */
const SingleServerRegion = z
  .strictObject({ ...regionFields, ...serverFields })
  .superRefine(checkSslmode)
  .transform((r) => {
    const {
      lockTimeoutMs,
      loginConnectionLimit,
      databaseConnectionLimit,
      idleInTransactionTimeoutMs,
      workspaceConnectionLimit,
      ...server
    } = r;
    return {
      lockTimeoutMs,
      loginConnectionLimit,
      databaseConnectionLimit,
      idleInTransactionTimeoutMs,
      workspaceConnectionLimit,
      servers: [defaultSslmode({ name: defaultServerName, ...server })],
    };
  });

const hostPortOf = (adminUrl: string) => {
  const u = parseAdminUrl(adminUrl);
  return u ? `${u.hostname}:${u.port || "5432"}` : undefined;
};

const MultiServerRegion = z.strictObject({
  ...regionFields,
  servers: z
    .array(ServerConfig)
    .min(1, { error: "a region needs at least one server" })
    .superRefine((servers, ctx) => {
      servers.forEach((s, i) => {
        const j = servers.findIndex((t) => t.name === s.name);
        if (j < i)
          ctx.addIssue({
            code: "custom",
            path: [i, "name"],
            message: `server name "${s.name}" is used twice in this region (also servers.${j})`,
          });
        const hostPort = hostPortOf(s.adminUrl);
        const k = servers.findIndex((t) => hostPort !== undefined && hostPortOf(t.adminUrl) === hostPort);
        if (k !== -1 && k < i && j >= i)
          ctx.addIssue({
            code: "custom",
            path: [i, "adminUrl"],
            message: `servers "${servers[k]!.name}" and "${s.name}" are the same server (same adminUrl host and port)`,
          });
      });
    }),
});

export type RegionInput = z.input<typeof SingleServerRegion> | z.input<typeof MultiServerRegion>;
/** What a region's settings may override in `mds service --embedded` (all regions share its servers there). */
export type RegionSettings = Partial<Omit<z.input<typeof SingleServerRegion>, "adminUrl">>;

/** A region's servers and settings, from either shape. */
// z.custom: any value reaches the transform, which validates it; the input type is still the regions file's.
export const RegionConfig = z
  .custom<RegionInput>(() => true)
  .transform((input, ctx) => {
    const shape =
      typeof input === "object" && input !== null && "servers" in input ? MultiServerRegion : SingleServerRegion;
    const parsed = shape.safeParse(input);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
    return z.NEVER;
  });
export type RegionConfig = z.infer<typeof RegionConfig>;

/** Public host and port of a server (the admin URL's by default). */
export function publicEndpoint(server: ServerConfig): { host: string; port: number } {
  const url = new URL(server.adminUrl);
  return { host: server.host ?? url.hostname, port: server.port ?? (url.port ? Number(url.port) : 5432) };
}
