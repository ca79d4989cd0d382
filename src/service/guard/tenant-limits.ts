import type { Logger } from "pino";
import type pg from "pg";
import { tenantLimitsOf, type ServiceConfig } from "../config/config.ts";
import type { Region } from "../../contract/index.ts";
import { databaseLimitStatement, loginLimitStatements } from "../placement/provisioner.ts";
import type { RegionServer } from "../placement/servers.ts";
import { inTransaction } from "../store/pool.ts";

// New databases and logins get their region's limits when they are made (placement/provisioner.ts). This brings the ones made
// before (older versions of the service, or other settings) to the region's current limits at start, touching only
// those that differ, so a restart over 10,000 databases costs two catalog queries per region server. Each server is
// asked only about the databases and logins that live on it (after reconcileServers recorded every database's server).

export async function applyTenantLimits(input: {
  config: ServiceConfig;
  control: pg.Pool;
  servers: Map<Region, RegionServer[]>;
  logger: Logger;
}): Promise<void> {
  for (const [region, servers] of input.servers) {
    for (const { name: server, pool } of servers) await applyOnServer(input, region, server, pool);
  }
}

async function applyOnServer(
  input: { config: ServiceConfig; control: pg.Pool; logger: Logger },
  region: Region,
  server: string,
  pool: pg.Pool,
): Promise<void> {
  const limits = tenantLimitsOf(input.config, region);
  const { rows: databases } = await input.control.query<{ pg_name: string }>(
    "SELECT pg_name FROM databases WHERE region = $1 AND server = $2 AND deleted_at IS NULL",
    [region, server],
  );
  const { rows: logins } = await input.control.query<{ role_name: string }>(
    "SELECT c.role_name FROM connections c JOIN databases d ON d.id = c.database_id WHERE d.region = $1 AND d.server = $2 AND d.deleted_at IS NULL AND c.revoked_at IS NULL",
    [region, server],
  );
  const { rows: staleDatabases } = await pool.query<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname = ANY($1) AND (datconnlimit <> $2 OR datistemplate)",
    [databases.map((d) => d.pg_name), limits.databaseConnectionLimit],
  );
  const { rows: staleLogins } = await pool.query<{ rolname: string }>(
    "SELECT rolname FROM pg_roles WHERE rolname = ANY($1) AND rolcanlogin AND (rolconnlimit <> $2 OR NOT coalesce(rolconfig, '{}') @> ARRAY[$3])",
    [
      logins.map((l) => l.role_name),
      limits.loginConnectionLimit,
      `idle_in_transaction_session_timeout=${limits.idleInTransactionTimeoutMs}`,
    ],
  );
  // One database or login that cannot be set (a lock its tenant holds past the lock timeout) is logged and skipped, so
  // no tenant can stop the service from starting; the tenant guard (tenant-guard.ts) enforces the limits meanwhile.
  const attempt = (statement: string, what: Record<string, string>) =>
    alterBriefly(pool, statement).catch((err: Error) =>
      input.logger.warn({ region, server, ...what, err: { message: err.message } }, "cannot apply a tenant limit"),
    );
  for (const { datname } of staleDatabases)
    await attempt(databaseLimitStatement(datname, limits), { database: datname });
  for (const { rolname } of staleLogins)
    for (const statement of loginLimitStatements(rolname, limits)) await attempt(statement, { login: rolname });
  if (staleDatabases.length + staleLogins.length > 0)
    input.logger.info(
      { region, server, databases: staleDatabases.length, logins: staleLogins.length },
      "applied the region's tenant limits",
    );
}

/**
 * One ALTER on a tenant's database or login that waits at most 200 ms for a lock: the tenant can hold its own
 * database's and login's catalog rows in an open transaction, and must not hold up the start or the guard with it.
 */
export async function alterBriefly(pool: pg.Pool, statement: string): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query("SET LOCAL lock_timeout = 200");
    await client.query(statement);
  });
}
