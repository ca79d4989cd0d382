import type { CreatedConnection } from "../api.ts";
import { createHash } from "node:crypto";
import { ReconcileError } from "../errors.ts";

// The credentials of one service connection: taken out of a creation response (the only place the service ever shows
// a password), turned into URLs, and hashed so a Secret proves which of them the operator wrote.

export interface Endpoint {
  host: string;
  port: number;
}

/** Everything needed to connect; lives only in memory and in the Secret. */
export interface ConnectionCredentials {
  connectionId: string;
  connectionName: string;
  user: string;
  password: string;
  database: string;
  sslmode: string;
  /**
   * The CA file the service's connection strings name (`sslrootcert`): a path on the service's machine, useful to
   * clients that share it (the embedded stack). Carried into the URLs and PGSSLROOTCERT.
   */
  sslrootcert?: string | undefined;
  direct: Endpoint;
  pooled?: Endpoint | undefined;
  /**
   * The accelerate endpoint's connection string, kept verbatim: the public API's is not a PostgreSQL URL
   * (`prisma+postgres://…?api_key=…`) and cannot be rebuilt from the login.
   */
  accelerateUrl?: string | undefined;
}

/** Parses a postgresql:// URL of a creation response into its parts. */
function parseConnectionString(url: string): {
  user: string;
  password: string;
  host: string;
  port: number;
  database: string;
  sslmode: string;
  sslrootcert?: string;
} {
  const u = new URL(url);
  return {
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    host: u.hostname,
    port: u.port === "" ? 5432 : Number(u.port),
    database: decodeURIComponent(u.pathname.replace(/^\//, "")),
    sslmode: u.searchParams.get("sslmode") ?? "prefer",
    ...(u.searchParams.get("sslrootcert") ? { sslrootcert: u.searchParams.get("sslrootcert")! } : {}),
  };
}

export function connectionUrl(c: ConnectionCredentials, endpoint: Endpoint): string {
  const enc = encodeURIComponent;
  const root = c.sslrootcert === undefined ? "" : `&sslrootcert=${enc(c.sslrootcert)}`;
  return `postgresql://${enc(c.user)}:${enc(c.password)}@${endpoint.host}:${endpoint.port}/${enc(c.database)}?sslmode=${enc(c.sslmode)}${root}`;
}

/** Proves the credentials are the operator's; the accelerate URL joins only when there is one (older Secrets hash the same). */
export function credentialsHash(connectionId: string, user: string, password: string, accelerateUrl?: string): string {
  const extra = accelerateUrl === undefined ? "" : `\u0000${accelerateUrl}`;
  return createHash("sha256").update(`${connectionId}\u0000${user}\u0000${password}${extra}`).digest("hex");
}

/**
 * Credentials out of a creation response's connection (the only place they ever appear). The public API may leave
 * out the direct endpoint or its connection string: then the operator cannot build a Secret and says so.
 */
export function credentialsFromCreated(connection: CreatedConnection): ConnectionCredentials {
  const direct = connection.endpoints.direct;
  const connectionString = direct?.connectionString ?? connection.endpoints.pooled?.connectionString;
  if (direct === undefined || connectionString === undefined) {
    throw new ReconcileError(
      "RemoteIncomplete",
      `the service created connection "${connection.id}" without ${direct === undefined ? "a direct endpoint" : "a connection string"}; the connection Secret cannot be built from it`,
    );
  }
  const parsed = parseConnectionString(connectionString);
  const pooled = connection.endpoints.pooled;
  return {
    connectionId: connection.id,
    connectionName: connection.name,
    user: parsed.user,
    password: parsed.password,
    database: parsed.database,
    sslmode: parsed.sslmode,
    ...(parsed.sslrootcert === undefined ? {} : { sslrootcert: parsed.sslrootcert }),
    direct: { host: direct.host, port: direct.port },
    pooled: pooled === undefined ? undefined : { host: pooled.host, port: pooled.port },
    ...(connection.endpoints.accelerate?.connectionString === undefined
      ? {}
      : { accelerateUrl: connection.endpoints.accelerate.connectionString }),
  };
}
