import { copyFile, mkdir, chmod } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "pino";
import { startPgBouncer, startPostgres, type RunningPgBouncer, type RunningPostgres } from "../../postgres/index.ts";

// The PostgreSQL servers of the embedded stack. The first one (DIR/postgres) also holds the control database; each
// further one (DIR/servers/<name>/) is a server of its own, with its own data directory, certificate and PgBouncer,
// so tests can place databases across the servers of one region as a real deployment would.

/** A server of every region of the embedded stack. */
export type EmbeddedServer = {
  /** Its name in the regions (and in the control store's record of each database's server). */
  name: string;
  maxDatabases?: number;
  draining?: boolean;
};

export type EmbeddedServerStack = { server: EmbeddedServer; postgres: RunningPostgres; pgbouncer?: RunningPgBouncer };

export type ServerStackOptions = {
  /** PostgreSQL's port (the first server only; others get a free one). */
  postgresPort?: number | undefined;
  postgresSettings?: Record<string, string> | undefined;
  postgresTemplate?: string | undefined;
  logger?: Logger | undefined;
  pooler: false | { port?: number; poolSize?: number; maxDbConnections?: number };
};

/** Where server `index` keeps its files: the first one where a one-server stack always had them. */
export function serverDir(dir: string, server: EmbeddedServer, index: number): string {
  return index === 0 ? dir : path.join(dir, "servers", server.name);
}

/** Starts PostgreSQL (TLS on, taking over one a killed service left running) under `dir`/postgres. */
export async function startServerPostgres(
  dir: string,
  name: string,
  options: ServerStackOptions,
  first: boolean,
): Promise<RunningPostgres> {
  return startPostgres({
    takeOver: true,
    tls: true,
    dir: path.join(dir, "postgres"),
    ...(first && options.postgresPort !== undefined ? { port: options.postgresPort } : {}),
    ...(options.logger ? { logger: options.logger.child({ component: "postgres", server: name }) } : {}),
    ...(options.postgresSettings ? { settings: options.postgresSettings } : {}),
    ...(options.postgresTemplate ? { template: options.postgresTemplate } : {}),
  });
}

/**
 * One CA for the whole stack: a further server gets the first server's CA before its certificate is issued, so the
 * `caCert` of service.json (and the CA this process trusts) verifies every server and PgBouncer of the stack.
 */
export async function shareCa(from: RunningPostgres, dir: string): Promise<void> {
  const tlsDir = path.join(dir, "postgres", "tls");
  await mkdir(tlsDir, { recursive: true, mode: 0o755 });
  const caFile = from.tls!.caFile;
  await copyFile(caFile, path.join(tlsDir, "ca.crt"));
  await copyFile(path.join(path.dirname(caFile), "ca.key"), path.join(tlsDir, "ca.key"));
  await chmod(path.join(tlsDir, "ca.key"), 0o600);
}

/** The PgBouncer of the `pooled` endpoint in front of `postgres`, with its files under `dir`/pgbouncer. */
export async function startServerPgBouncer(
  dir: string,
  name: string,
  postgres: RunningPostgres,
  options: ServerStackOptions,
  first: boolean,
): Promise<RunningPgBouncer | undefined> {
  if (!options.pooler) return undefined;
  const pooler = options.pooler;
  return startPgBouncer({
    dir: path.join(dir, "pgbouncer"),
    server: { host: postgres.host, port: postgres.port, adminUrl: postgres.url },
    tls: postgres.tls!,
    ...(first && pooler.port !== undefined ? { port: pooler.port } : {}),
    ...(pooler.poolSize !== undefined ? { poolSize: pooler.poolSize } : {}),
    ...(pooler.maxDbConnections !== undefined ? { maxDbConnections: pooler.maxDbConnections } : {}),
    ...(options.logger ? { logger: options.logger.child({ component: "pgbouncer", server: name }) } : {}),
  });
}
