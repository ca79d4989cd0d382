import type pg from "pg";
import type { Logger } from "pino";
import type { Region } from "../../contract/index.ts";
import { enabledRegions, lockTimeoutOf, type ServerConfig, type ServiceConfig } from "../config/config.ts";
import { ServiceError } from "../shared/errors.ts";
import { createPool } from "../store/pool.ts";

// A region is one or more PostgreSQL servers (regions file). A database lives on one of them for its whole life: the
// `server` column of its row names it, and every operation on the database goes to that server through `serverOf`.

/** One server of one region, with the service's superuser pool on it (regions listing the same server share the pool). */
export type RegionServer = { region: Region; name: string; config: ServerConfig; pool: pg.Pool };

/** The servers of each region, in the regions file's order (ServiceDeps.servers, which imports this file, not back). */
export type RegionServers = Map<Region, RegionServer[]>;

/** What locates a database: its region and the name of its server there (null: the region's first, see serverConfigOf). */
export type ServerRef = { region: string; server: string | null };

/** A pool per distinct admin URL; the servers of every region in config order. */
export function openServers(config: ServiceConfig): { servers: RegionServers; pools: pg.Pool[] } {
  const byUrl = new Map<string, pg.Pool>();
  const servers: RegionServers = new Map();
  for (const region of enabledRegions(config)) {
    servers.set(
      region,
      config.regions[region]!.servers.map((s) => {
        let pool = byUrl.get(s.adminUrl);
        if (!pool) {
          // A tenant can hold locks on its own database and roles: the service's superuser statements never wait
          // forever. (A server listed by several regions gets the first region's setting.)
          pool = createPool(s.adminUrl, 8, { lockTimeoutMs: lockTimeoutOf(config, region) });
          byUrl.set(s.adminUrl, pool);
        }
        return { region, name: s.name, config: s, pool };
      }),
    );
  }
  return { servers, pools: [...byUrl.values()] };
}

/** The server a database lives on. A region or server the regions file no longer has is 422 / 503, never a crash. */
export function serverOf(deps: { servers: RegionServers }, at: ServerRef): RegionServer {
  const servers = deps.servers.get(at.region as Region);
  if (!servers)
    throw new ServiceError(
      "region_unavailable",
      `region "${at.region}" has no PostgreSQL server`,
      "use one of the regions this service runs",
    );
  const server = at.server === null ? servers[0] : servers.find((s) => s.name === at.server);
  if (!server)
    throw new ServiceError(
      "unavailable",
      `the server "${at.server}" of region "${at.region}" that holds this database is not configured`,
      "the service's operator must list that server in the regions file again",
    );
  return server;
}

/**
 * At start: rows from before databases recorded their server get their region's first server (then its only one),
 * and a server that still holds live databases must still be configured: dropping it from the file would orphan them.
 */
export async function reconcileServers(control: pg.Pool, config: ServiceConfig, logger: Logger): Promise<void> {
  for (const region of enabledRegions(config)) {
    const servers = config.regions[region]!.servers;
    const { rowCount } = await control.query("UPDATE databases SET server = $2 WHERE region = $1 AND server IS NULL", [
      region,
      servers[0]!.name,
    ]);
    if (rowCount)
      logger.info(
        { region, server: servers[0]!.name, databases: rowCount },
        "recorded the server of databases made before servers were recorded",
      );
    const { rows } = await control.query<{ server: string; n: number }>(
      "SELECT server, count(*)::int AS n FROM databases WHERE region = $1 AND deleted_at IS NULL AND NOT (server = ANY($2)) GROUP BY server ORDER BY server",
      [region, servers.map((s) => s.name)],
    );
    if (rows.length > 0) {
      const list = rows.map((r) => `"${r.server}" (${r.n} databases)`).join(", ");
      throw new Error(
        `regions: ${region}: the regions file no longer lists server ${list}; list it again (with draining: true to take no new databases), or delete those databases first`,
      );
    }
  }
}

type Candidate = Pick<ServerConfig, "name" | "maxDatabases" | "draining">;

/**
 * The server with the most room (maxDatabases minus its databases; unbounded servers have endless room), among those
 * that take new databases. Ties: fewer databases, then the regions file's order, so placement is deterministic.
 */
export function chooseServer<T extends Candidate>(servers: T[], counts: Map<string, number>): T | undefined {
  const room = (s: T) => (s.maxDatabases === undefined ? Infinity : s.maxDatabases - (counts.get(s.name) ?? 0));
  const open = servers.filter((s) => !s.draining && room(s) > 0);
  // Array.prototype.sort is stable: equal servers keep the file's order.
  return open.sort((a, b) => room(b) - room(a) || (counts.get(a.name) ?? 0) - (counts.get(b.name) ?? 0))[0];
}

/** Live databases per server of a region (rows without a server count for the first one). */
async function countsOf(db: Pick<pg.Pool, "query">, region: string, first: string): Promise<Map<string, number>> {
  const { rows } = await db.query<{ server: string; n: number }>(
    "SELECT coalesce(server, $2) AS server, count(*)::int AS n FROM databases WHERE region = $1 AND deleted_at IS NULL GROUP BY 1",
    [region, first],
  );
  return new Map(rows.map((r) => [r.server, r.n]));
}

// Any fixed number (with the region's hash): serialises placements in one region, see placeDatabase.
const placementLock = 7_221_002;

/**
 * Picks the server of a new database of `region`, in the creating transaction. When a server has a bound, the
 * region's placements wait for each other (a lock held until commit) so that two creations never both take a
 * server's last place; without bounds a race only skews the balance by one, so nothing waits.
 */
export async function placeDatabase(
  deps: { servers: RegionServers; logger: Logger },
  client: pg.PoolClient,
  region: Region,
  databaseId: string,
): Promise<RegionServer> {
  // resolveRegion checked the region: an unknown one here would only mean no candidate, answered below.
  const servers = deps.servers.get(region) ?? [];
  if (servers.some((s) => s.config.maxDatabases !== undefined))
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [placementLock, region]);
  // One unbounded server (every region before several servers existed) needs no count: creation stays as fast as it was.
  const alone = servers.length === 1 && servers[0]!.config.maxDatabases === undefined;
  const counts = alone ? new Map<string, number>() : await countsOf(client, region, servers[0]?.name ?? "");
  const chosen = chooseServer(
    servers.map((s) => ({ ...s.config, server: s })),
    counts,
  )?.server;
  if (!chosen) {
    // The details are the operator's (they count every workspace's databases): the log has them, the caller not.
    const state = Object.fromEntries(
      servers.map((s) => [
        s.name,
        s.config.draining ? "draining" : `${counts.get(s.name) ?? 0}/${s.config.maxDatabases}`,
      ]),
    );
    deps.logger.warn(
      { region, servers: state },
      "a region has no room for a new database: add a server or raise maxDatabases",
    );
    throw new ServiceError(
      "region_unavailable",
      `region "${region}" has no room for a new database: every server of it is full or draining`,
      "create the database in another region, or ask the service's operator to add a server to this region or raise its maxDatabases",
    );
  }
  // Names and counts only: a server's admin URL holds a password.
  const load = alone
    ? {}
    : { databasesOnServer: counts.get(chosen.name) ?? 0, maxDatabases: chosen.config.maxDatabases ?? null };
  deps.logger.info({ region, server: chosen.name, database: databaseId, ...load }, "placed a new database");
  return chosen;
}

/** Whether `region` takes a new database now (a server neither draining nor full). */
export async function regionHasRoom(deps: { servers: RegionServers; pool: pg.Pool }, region: Region): Promise<boolean> {
  const servers = deps.servers.get(region);
  if (!servers) return false;
  if (servers.every((s) => s.config.draining)) return false;
  if (servers.some((s) => !s.config.draining && s.config.maxDatabases === undefined)) return true;
  return (
    chooseServer(
      servers.map((s) => s.config),
      await countsOf(deps.pool, region, servers[0]!.name),
    ) !== undefined
  );
}
