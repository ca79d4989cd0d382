import type pg from "pg";
import type { Logger } from "pino";
import type { Region } from "../../contract/index.ts";
import { tenantLimitsOf, type ServiceConfig, type TenantLimits } from "../config/config.ts";
import { databaseLimitStatement, ident } from "../placement/provisioner.ts";
import { alterBriefly } from "./tenant-limits.ts";
import type { RegionServer } from "../placement/servers.ts";

// A tenant login acts as its database's owner, so it can undo what the service set on its database and session:
// `ALTER DATABASE <own> CONNECTION LIMIT -1` (then hold as many sessions as its logins allow), `IS_TEMPLATE true`
// (then the database cannot be dropped), `SET idle_in_transaction_session_timeout = 0` or the same by ALTER ROLE /
// ALTER DATABASE … SET (then keep a transaction open forever). PostgreSQL cannot stop an owner from doing that, so
// the guard looks, every `tenantGuardIntervalMs`, at what each region server has, and puts it back:
//   - a tenant database whose CONNECTION LIMIT or IS_TEMPLATE differs from ours gets ours again;
//   - tenant sessions past their login's, their database's or their workspace's connection limit are ended, newest
//     first (the oldest keep running), and so are those idle in a transaction longer than the region's timeout;
//   - any session of a revoked login or of a deleted database is ended and the login shut (NOLOGIN): revocation and
//     deletion do that themselves, this is for when they could not reach the server (counted toward no limit, such a
//     session would be free).
// Cost per server and tick: one query on the server (pg_stat_activity and pg_database, as one statement) and, only
// when it shows a login or a database the guard has not seen lately, one indexed lookup in the control database.
// Every replica runs it; two guards ending the same session or setting the same limit is harmless.

/** A tenant session as the server shows it, oldest first. `idleMs`: how long it is idle in a transaction (else null). */
export type ServerSession = { pid: number; login: string; database: string; idleMs: number | null };
/**
 * What the control database says of a login: its database, workspace and region (for the limits), and whether it is
 * revoked (itself, or its database deleted).
 */
export type LoginOwner = { database: string; workspace: string; region: string; revoked: boolean };
type SessionVerdict = {
  pid: number;
  reason: "revoked" | "idle in transaction" | "login limit" | "database limit" | "workspace limit";
};

/**
 * Which sessions to end. `sessions` oldest first; sessions of logins not in `owners` (the pooler's lookup, job
 * logins, anything not a tenant's) are never touched and never counted. A session ended for one reason does not
 * count toward the others, so the oldest sessions within every limit are the ones kept.
 */
export function sessionsToEnd(
  sessions: ServerSession[],
  owners: Map<string, LoginOwner>,
  limitsOf: (region: string) => TenantLimits,
): SessionVerdict[] {
  const ended: SessionVerdict[] = [];
  const counts = new Map<string, number>();
  const within = (key: string, limit: number) => (counts.get(key) ?? 0) < limit;
  for (const s of sessions) {
    const owner = owners.get(s.login);
    if (!owner) continue;
    const limits = limitsOf(owner.region);
    const keys = { login: `l:${s.login}`, database: `d:${owner.database}`, workspace: `w:${owner.workspace}` };
    let reason: SessionVerdict["reason"] | undefined;
    if (owner.revoked) reason = "revoked";
    else if (s.idleMs !== null && limits.idleInTransactionTimeoutMs > 0 && s.idleMs > limits.idleInTransactionTimeoutMs)
      reason = "idle in transaction";
    else if (!within(keys.login, limits.loginConnectionLimit)) reason = "login limit";
    else if (!within(keys.database, limits.databaseConnectionLimit)) reason = "database limit";
    else if (!within(keys.workspace, limits.workspaceConnectionLimit)) reason = "workspace limit";
    if (reason) {
      ended.push({ pid: s.pid, reason });
      continue;
    }
    for (const key of Object.values(keys)) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return ended;
}

// One statement: every non-superuser client session (oldest first), and every database of a non-superuser owner
// whose limit is none of the configured ones or that is marked a template (spares and ours belong to the superuser).
export const serverStateSql = `
SELECT
  coalesce((
    SELECT json_agg(json_build_object(
      'pid', a.pid, 'login', a.usename, 'database', a.datname,
      'idleMs', CASE WHEN a.state LIKE 'idle in transaction%' THEN (extract(epoch FROM clock_timestamp() - a.state_change) * 1000)::bigint END
    ) ORDER BY a.backend_start, a.pid)
    FROM pg_catalog.pg_stat_activity a JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
    WHERE a.backend_type = 'client backend' AND NOT r.rolsuper AND a.pid <> pg_catalog.pg_backend_pid()
  ), '[]') AS sessions,
  coalesce((
    SELECT json_agg(json_build_object('name', d.datname, 'limit', d.datconnlimit, 'template', d.datistemplate))
    FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid = d.datdba
    WHERE NOT r.rolsuper AND (d.datistemplate OR NOT (d.datconnlimit = ANY($1::int[])))
  ), '[]') AS changed`;

type ChangedDatabase = { name: string; limit: number; template: boolean };

/** Limits the guard may fail to put back (a lock held) in one tick of one server before it leaves the rest for the next. */
const maxRefusedPerTick = 3;

/**
 * Tries `putBack` on each database, in name order starting after `after` and wrapping around, until it is refused
 * `maxRefusedPerTick` times (each refusal waited 200 ms: a few per tick, the rest next time, so many locked databases
 * cannot stall the guard). Returns where it stopped (the last refused database), or undefined when it tried them all:
 * the next tick starts after it, so a few databases whose rows their tenants keep locked cannot come first every tick
 * and starve every other database's put-back.
 */
export async function putBackInTurn(
  names: string[],
  after: string | undefined,
  putBack: (name: string) => Promise<boolean>,
): Promise<string | undefined> {
  const sorted = [...names].sort();
  const next = sorted.findIndex((n) => after !== undefined && n > after);
  const start = next < 0 ? 0 : next;
  let refused = 0;
  for (let i = 0; i < sorted.length; i++) {
    const name = sorted[(start + i) % sorted.length]!;
    if (await putBack(name)) continue;
    if (++refused >= maxRefusedPerTick) return name;
  }
  return undefined;
}

/**
 * How long what the control database said of a login is believed: a login it does not know (the pooler's, a job's)
 * is not asked about again, a known one not checked again for revocation, for that long.
 */
const ownerTtlMs = 30_000;

export type TenantGuard = {
  stop(): Promise<void>;
  /** One pass over every server now (tests, and the first pass at start). */ tick(): Promise<void>;
};

export function startTenantGuard(input: {
  config: ServiceConfig;
  control: pg.Pool;
  servers: Map<Region, RegionServer[]>;
  logger: Logger;
}): TenantGuard {
  const logger = input.logger.child({ component: "tenant-guard" });
  const limitsOf = (region: string) => tenantLimitsOf(input.config, region);
  // A server listed by several regions (or twice) is one pool: guarded once.
  const byPool = new Map<pg.Pool, { name: string; limits: number[] }>();
  for (const [region, servers] of input.servers) {
    for (const s of servers) {
      const entry = byPool.get(s.pool) ?? { name: s.name, limits: [] };
      entry.limits.push(limitsOf(region).databaseConnectionLimit);
      byPool.set(s.pool, entry);
    }
  }
  const owners = new Map<string, LoginOwner & { until: number }>();
  const unknown = new Map<string, number>();
  const failing = new Set<pg.Pool>();
  /** Per server: the database where the last tick's put-back stopped; the next starts after it. */
  const cursors = new Map<pg.Pool, string | undefined>();

  async function ownersOf(logins: string[]): Promise<Map<string, LoginOwner>> {
    const now = Date.now();
    const missing = logins.filter((l) => (owners.get(l)?.until ?? 0) < now && (unknown.get(l) ?? 0) < now);
    if (missing.length > 0) {
      const { rows } = await input.control.query<{ login: string } & LoginOwner>(
        `SELECT c.role_name AS login, d.pg_name AS database, d.workspace_id AS workspace, d.region,
                (c.revoked_at IS NOT NULL OR d.deleted_at IS NOT NULL) AS revoked
         FROM connections c JOIN databases d ON d.id = c.database_id
         WHERE c.role_name = ANY($1)`,
        [missing],
      );
      for (const l of missing) owners.delete(l);
      for (const { login, ...owner } of rows) owners.set(login, { ...owner, until: now + ownerTtlMs });
      for (const l of missing) if (!owners.has(l)) unknown.set(l, now + ownerTtlMs);
    }
    // Forget what no session uses any more, so the maps stay the size of the server's sessions.
    const seen = new Set(logins);
    for (const l of owners.keys()) if (!seen.has(l)) owners.delete(l);
    for (const [l, until] of unknown) if (until < now) unknown.delete(l);
    return owners;
  }

  async function guardServer(pool: pg.Pool, server: { name: string; limits: number[] }): Promise<void> {
    const { rows } = await pool.query<{ sessions: ServerSession[]; changed: ChangedDatabase[] }>(serverStateSql, [
      [...new Set(server.limits)],
    ]);
    const { sessions, changed } = rows[0]!;
    // Sessions first: putting a limit back can wait on a lock the tenant holds; ending sessions never does.
    const known = await ownersOf([...new Set(sessions.map((s) => s.login))]);
    const ended = sessionsToEnd(sessions, known, limitsOf);
    // A revoked login first loses LOGIN (else it would be back before the next tick); a lock its tenant holds on the
    // role only delays that to a later tick.
    const revoked = new Set(
      ended.filter((e) => e.reason === "revoked").map((e) => sessions.find((s) => s.pid === e.pid)!.login),
    );
    for (const login of revoked) await alterBriefly(pool, `ALTER ROLE ${ident(login)} NOLOGIN`).catch(() => {});
    if (ended.length > 0) {
      await pool.query("SELECT pg_catalog.pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [
        ended.map((e) => e.pid),
      ]);
      const reasons: Record<string, number> = {};
      for (const e of ended) reasons[e.reason] = (reasons[e.reason] ?? 0) + 1;
      logger.info({ server: server.name, ended: ended.length, reasons }, "ended tenant sessions past their limits");
    }
    if (changed.length === 0) return;
    const { rows: ours } = await input.control.query<{ pg_name: string; region: string }>(
      "SELECT pg_name, region FROM databases WHERE pg_name = ANY($1) AND deleted_at IS NULL",
      [changed.map((d) => d.name)],
    );
    const regionOf = new Map(ours.map((d) => [d.pg_name, d.region]));
    const putBack = async (name: string): Promise<boolean> => {
      const d = changed.find((c) => c.name === name)!;
      const limit = limitsOf(regionOf.get(name)!).databaseConnectionLimit;
      if (d.limit === limit && !d.template) return true;
      try {
        // A tenant transaction that changed the database's row holds it: give up quickly and try again next tick
        // (its sessions are bounded above meanwhile), rather than stall the guard of every tenant.
        await alterBriefly(pool, databaseLimitStatement(name, { databaseConnectionLimit: limit }));
        logger.warn(
          { server: server.name, database: name, connectionLimit: d.limit, template: d.template },
          "put back a tenant database's connection limit its owner had changed",
        );
        return true;
      } catch (err) {
        logger.warn(
          { server: server.name, database: name, err: { message: (err as Error).message } },
          "cannot put back a tenant database's connection limit yet",
        );
        return false;
      }
    };
    cursors.set(pool, await putBackInTurn([...regionOf.keys()], cursors.get(pool), putBack));
  }

  async function tick(): Promise<void> {
    for (const [pool, server] of byPool) {
      if (stopped) return;
      try {
        await guardServer(pool, server);
        if (failing.delete(pool)) logger.info({ server: server.name }, "the tenant guard reaches the server again");
      } catch (err) {
        // Once per outage, not every tick. Never the error's connection details: the message only.
        if (!failing.has(pool))
          logger.warn(
            { server: server.name, err: { message: (err as Error).message } },
            "the tenant guard cannot check a server",
          );
        failing.add(pool);
      }
    }
  }

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = () => {
    timer = setTimeout(() => {
      running = tick().finally(() => {
        if (!stopped) schedule();
      });
    }, input.config.tenantGuardIntervalMs);
    timer.unref();
  };
  schedule();
  return {
    tick: () => (running = running.then(tick)),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
