import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { templateCluster } from "../../src/postgres/index.ts";
import { startEmbeddedService, type EmbeddedService } from "../../src/service/embedded/stack.ts";
import { client, eventually, type Json } from "./helpers.ts";

// The data plane of the embedded stack: TLS on PostgreSQL and PgBouncer (clients verify with the stack's CA), the
// pooled endpoint through a real PgBouncer in transaction mode, revocation through both endpoints (open pooled
// sessions included), and a bounded number of server connections under 200 concurrent clients.

const run = promisify(execFile);
const poolSize = 5;

type Endpoint = { host: string; port: number; connectionString: string };
type Login = { user: string; password: string; database: string; direct: Endpoint; pooled: Endpoint };

function loginOf(connection: Json): Login {
  const direct = new URL(connection.endpoints.direct.connectionString);
  return {
    user: decodeURIComponent(direct.username),
    password: decodeURIComponent(direct.password),
    database: direct.pathname.slice(1),
    direct: connection.endpoints.direct,
    pooled: connection.endpoints.pooled,
  };
}

describe("data plane: TLS and the PgBouncer pooled endpoint", () => {
  let dir: string;
  let service: EmbeddedService;
  let api: ReturnType<typeof client>;
  let caCert: string;
  let caFile: string;

  /** A pg client with the CA given explicitly (verify-full: pg checks the CA and that the host is in the certificate). */
  const verified = (
    login: Pick<Login, "user" | "password" | "database">,
    endpoint: { host: string; port: number },
    password = login.password,
  ) => {
    const c = new pg.Client({
      host: endpoint.host,
      port: endpoint.port,
      user: login.user,
      password,
      database: login.database,
      ssl: { ca: caCert },
      connectionTimeoutMillis: 5000,
    });
    c.on("error", () => {});
    return c;
  };
  const refused = async (
    login: Login,
    endpoint: { host: string; port: number },
    password = login.password,
  ): Promise<boolean> => {
    const c = verified(login, endpoint, password);
    try {
      await c.connect();
      await c.query("SELECT 1");
      return false;
    } catch {
      return true;
    } finally {
      await c.end().catch(() => {});
    }
  };

  async function readyDatabase(name: string): Promise<Json> {
    const created = await api("POST", "/v1/projects", { name });
    expect(created.status).toBe(201);
    const db = created.body.data.database;
    await eventually(async () => expect((await api("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready"), {
      timeoutMs: 60_000,
    });
    return db;
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-data-plane-"));
    service = await startEmbeddedService({
      dir,
      port: 0,
      logger: pino({ level: "silent" }),
      postgresSettings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
      postgresTemplate: await templateCluster(),
      pooler: { poolSize, maxDbConnections: poolSize },
      service: {
        rateLimit: { perSecond: 1000, burst: 1000 },
        authRateLimit: { perSecond: 1000, burst: 1000 },
        jobPollIntervalMs: 200,
        spareDatabases: 1,
      },
    });
    api = client(service, service.token);
    const json = JSON.parse(await readFile(path.join(dir, "service.json"), "utf8")) as {
      caCert: string;
      caFile: string;
    };
    caCert = json.caCert;
    caFile = json.caFile;
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("service.json carries the CA; strings say sslmode=require with the CA file, pooled adds pgbouncer=true", async () => {
    expect(caCert).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(await readFile(caFile, "utf8")).toBe(caCert);
    const db = await readyDatabase("tls-strings");
    const login = loginOf(db.connections[0]);
    expect(login.direct.port).toBe(service.postgres.port);
    expect(login.pooled.port).toBe(service.pgbouncer!.port);
    expect(new URL(login.direct.connectionString).search).toBe(`?sslmode=require&sslrootcert=${caFile}`);
    // Prisma's flag for a transaction-mode PgBouncer that cannot keep prepared statements (before 1.21; Debian 12 has 1.18).
    const flag = service.pgbouncer!.preparedStatements ? "" : "&pgbouncer=true";
    expect(new URL(login.pooled.connectionString).search).toBe(`?sslmode=require&sslrootcert=${caFile}${flag}`);
  });

  it("sslmode=verify-full with psql (PGSSLROOTCERT) and pg (ssl: { ca }) through both endpoints, encrypted to the server", async () => {
    const db = await readyDatabase("verify-full");
    const login = loginOf(db.connections[0]);
    const admin = new pg.Client({ connectionString: service.postgres.url });
    await admin.connect();
    onTestFinished(() => admin.end());
    for (const endpoint of [login.direct, login.pooled]) {
      const { stdout } = await run(
        "psql",
        [
          "-XAtc",
          "SELECT current_database()",
          `host=${endpoint.host} port=${endpoint.port} user=${login.user} dbname=${login.database} sslmode=verify-full`,
        ],
        {
          env: { ...process.env, PGPASSWORD: login.password, PGSSLROOTCERT: caFile, PGCONNECT_TIMEOUT: "10" },
        },
      );
      expect(stdout.trim()).toBe(login.database);
      const c = verified(login, endpoint);
      await c.connect();
      await c.query("SELECT 1");
      // Every server session of the login (PgBouncer's, for the pooled endpoint) is TLS too.
      const { rows } = await admin.query<{ ssl: boolean }>(
        "SELECT DISTINCT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = $1",
        [login.user],
      );
      expect(rows).toEqual([{ ssl: true }]);
      await c.end();
    }
    // The direct connection string as handed out works with libpq as it is (sslrootcert in it: verify-ca).
    const { stdout } = await run("psql", ["-XAtc", "SELECT 1", login.direct.connectionString], {
      env: { ...process.env, PGCONNECT_TIMEOUT: "10" },
    });
    expect(stdout.trim()).toBe("1");
    // A CA that did not sign the server's certificate is refused by both.
    const { generate } = await import("selfsigned");
    const other = (await generate([{ name: "commonName", value: "other" }], { keyType: "ec" })).cert;
    for (const endpoint of [login.direct, login.pooled]) {
      const c = new pg.Client({
        host: endpoint.host,
        port: endpoint.port,
        user: login.user,
        password: login.password,
        database: login.database,
        ssl: { ca: other },
      });
      c.on("error", () => {});
      await expect(c.connect()).rejects.toThrow(/certificate/);
      await c.end().catch(() => {});
    }
  });

  it("PgBouncer refuses a client without TLS", async () => {
    const db = await readyDatabase("no-plain");
    const login = loginOf(db.connections[0]);
    const c = new pg.Client({
      host: login.pooled.host,
      port: login.pooled.port,
      user: login.user,
      password: login.password,
      database: login.database,
      ssl: false,
      connectionTimeoutMillis: 5000,
    });
    c.on("error", () => {});
    await expect(c.connect()).rejects.toThrow();
    await c.end().catch(() => {});
  });

  it("a revoked connection is refused by both endpoints, its open pooled session included", async () => {
    const db = await readyDatabase("revoke");
    const minted = await api("POST", `/v1/databases/${db.id}/connections`, { name: "doomed" });
    expect(minted.status).toBe(201);
    const login = loginOf(minted.body.data);
    const pooled = verified(login, login.pooled);
    await pooled.connect();
    await pooled.query("CREATE TABLE t (v int)");
    const direct = verified(login, login.direct);
    await direct.connect();
    expect((await api("DELETE", `/v1/connections/${minted.body.data.id}`)).status).toBe(204);
    await expect(pooled.query("SELECT 1")).rejects.toThrow();
    await expect(direct.query("SELECT 1")).rejects.toThrow();
    await pooled.end().catch(() => {});
    await direct.end().catch(() => {});
    expect(await refused(login, login.direct)).toBe(true);
    expect(await refused(login, login.pooled)).toBe(true);
    // The database's default connection still works through both.
    const keeper = loginOf(db.connections[0]);
    expect(await refused(keeper, keeper.direct)).toBe(false);
    expect(await refused(keeper, keeper.pooled)).toBe(false);
  });

  it("revoking a connection nobody uses through the pooler disconnects no other pooled client", async () => {
    const db = await readyDatabase("revoke-unused");
    const keeper = loginOf(db.connections[0]);
    const open = verified(keeper, keeper.pooled);
    await open.connect();
    await open.query("SELECT 1");
    const minted = await api("POST", `/v1/databases/${db.id}/connections`, { name: "unused" });
    expect((await api("DELETE", `/v1/connections/${minted.body.data.id}`)).status).toBe(204);
    expect((await open.query<{ n: number }>("SELECT 2 AS n")).rows).toEqual([{ n: 2 }]);
    await open.end();
  });

  it("rotate: the old password is refused by both, and a pooled session opened with it does not ride on the new one", async () => {
    const db = await readyDatabase("rotate");
    const old = loginOf(db.connections[0]);
    const pooled = verified(old, old.pooled);
    await pooled.connect();
    await pooled.query("SELECT 1");
    const rotated = await api("POST", `/v1/connections/${db.connections[0].id}/rotate`);
    expect(rotated.status).toBe(200);
    const fresh = loginOf(rotated.body.data);
    // A client with the new password logs in first: PgBouncer's pool now holds the new keys.
    const next = verified(fresh, fresh.pooled);
    await next.connect();
    expect((await next.query<{ n: number }>("SELECT 1 AS n")).rows).toEqual([{ n: 1 }]);
    await next.end();
    await expect(pooled.query("SELECT 1")).rejects.toThrow();
    await pooled.end().catch(() => {});
    expect(await refused(old, old.direct)).toBe(true);
    expect(await refused(old, old.pooled)).toBe(true);
    expect(await refused(fresh, fresh.direct)).toBe(false);
    expect(await refused(fresh, fresh.pooled)).toBe(false);
  });

  it("200 concurrent pooled clients are served by at most the pool size of server connections", async () => {
    const db = await readyDatabase("many");
    const login = loginOf(db.connections[0]);
    const clients = Array.from({ length: 200 }, () => verified(login, login.pooled));
    let peak = 0;
    const admin = new pg.Client({ connectionString: service.postgres.url });
    await admin.connect();
    const sample = async () => {
      const { rows } = await admin.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND usename = $2",
        [login.database, login.user],
      );
      peak = Math.max(peak, rows[0]!.n);
    };
    try {
      await Promise.all(clients.map((c) => c.connect()));
      let done = false;
      const sampler = (async () => {
        while (!done) {
          await sample();
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const results = await Promise.all(
        clients.map(
          async (c, i) => (await c.query<{ v: number }>("SELECT $1::int AS v, pg_sleep(0.05)", [i])).rows[0]!.v,
        ),
      );
      done = true;
      await sampler;
      await sample();
      expect(results).toEqual(Array.from({ length: 200 }, (_, i) => i));
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(poolSize);
      console.log(`200 pooled clients: peak ${peak} server connections (pool size ${poolSize})`);
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => {})));
      await admin.end();
    }
  }, 120_000);
});
