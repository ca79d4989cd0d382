import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  grantPoolerConnect,
  startPgBouncer,
  startPostgres,
  templateCluster,
  type RunningPgBouncer,
  type RunningPostgres,
} from "./index.ts";

// An attack on the pooler: PgBouncer runs its auth_query as `mds_pooler` in each database a client
// names, and keeps that server connection idle for server_idle_timeout (60 s). Whoever reaches the pooled endpoint
// could send logins (any user, any password) naming as many tenant databases as `mds_pooler` may hold connections
// (its CONNECTION LIMIT): every other tenant's pooled login then failed for a minute. Here the limit is 4 (the
// default 100 needs 100 databases; same attack).

const authConnections = 4;

describe("the pooler's lookup connections", () => {
  let dir: string;
  let postgres: RunningPostgres;
  let bouncer: RunningPgBouncer;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-pgb-auth-"));
    postgres = await startPostgres({
      dir: path.join(dir, "pg"),
      template: await templateCluster(),
      tls: true,
      settings: { fsync: "off" },
    });
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    for (let i = 0; i <= authConnections; i++) {
      await admin.query(`CREATE ROLE mds_s${i}_owner NOLOGIN`);
      await admin.query(`CREATE ROLE mds_s${i}_login LOGIN PASSWORD 'pw-${i}' IN ROLE mds_s${i}_owner`);
      await admin.query(`CREATE DATABASE mds_s${i} OWNER mds_s${i}_owner`);
      await admin.query(`REVOKE ALL ON DATABASE mds_s${i} FROM PUBLIC`);
      await grantPoolerConnect(admin, `mds_s${i}`);
    }
    bouncer = await startPgBouncer({
      dir: path.join(dir, "pgbouncer"),
      server: { host: postgres.host, port: postgres.port, adminUrl: postgres.url },
      tls: postgres.tls!,
      authConnections,
    });
    // What startPgBouncer sets (before this option existed, the limit was 100: set here so the attack is the same).
    await admin.query(`ALTER ROLE mds_pooler CONNECTION LIMIT ${authConnections}`);
    await admin.end();
  }, 60_000);

  afterAll(async () => {
    await bouncer?.stop();
    await postgres?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const login = async (database: string, user: string, password: string) => {
    const c = new pg.Client({
      host: bouncer.host,
      port: bouncer.port,
      user,
      password,
      database,
      ssl: { ca: postgres.tls!.caCert },
      connectionTimeoutMillis: 10_000,
    });
    c.on("error", () => {});
    try {
      await c.connect();
      return (await c.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one;
    } catch (err) {
      return (err as Error).message;
    } finally {
      await c.end().catch(() => {});
    }
  };

  it("cannot all be held by failed logins naming many databases: another tenant still logs in", async () => {
    // The attacker: a wrong password for a login of each of the other databases (names and logins are in the catalog).
    for (let i = 1; i <= authConnections; i++)
      expect(await login(`mds_s${i}`, `mds_s${i}_login`, "guess")).toMatch(/password authentication failed|SASL/);
    const held = new pg.Client({ connectionString: postgres.url });
    await held.connect();
    const { rows } = await held.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = 'mds_pooler'",
    );
    await held.end();
    expect(rows[0]!.n).toBe(authConnections);
    // The victim, right after: its lookup needs a connection in its own database.
    expect(await login("mds_s0", "mds_s0_login", "pw-0")).toBe(1);
  });
});
