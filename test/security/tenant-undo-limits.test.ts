import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// Undoing the service.s limits: a tenant owns its database, so it can change what the service set on it (CONNECTION
// LIMIT, IS_TEMPLATE, ALTER DATABASE … SET, ALTER ROLE … SET on its login) and in its sessions (SET). None of that
// may raise its share of the server, escape the idle-in-transaction bound, or break the service for anyone.

const open: pg.Client[] = [];
afterAll(async () => {
  for (const c of open) await c.end().catch(() => {});
});

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  open.push(c);
  return c;
}

type Tenant = { id: string; token: string; url: string; pooled: string; datname: string; login: string };

async function tenant(service: TestService, workspace: string, name = workspace): Promise<Tenant> {
  const token = await service.createToken(workspace);
  return database(service, token, name);
}

async function database(service: TestService, token: string, name: string): Promise<Tenant> {
  const api = client(service, token);
  const created = (await api("POST", "/v1/projects", { name })).body.data;
  await eventually(async () =>
    expect((await api("GET", `/v1/databases/${created.database.id}`)).body.data.status).toBe("ready"),
  );
  const endpoints = created.database.connections[0].endpoints;
  const url = endpoints.direct.connectionString as string;
  const [me] = await sql<{ login: string; datname: string }>(
    url,
    "SELECT session_user AS login, current_database() AS datname",
  );
  return {
    id: created.database.id,
    token,
    url,
    pooled: endpoints.pooled.connectionString,
    datname: me!.datname,
    login: me!.login,
  };
}

async function mint(service: TestService, token: string, databaseId: string): Promise<string> {
  const res = await client(service, token)("POST", `/v1/databases/${databaseId}/connections`, { name: "more" });
  expect(res.status).toBe(201);
  return (res.body.data as Json).endpoints.direct.connectionString;
}

/** Sessions of `logins` on the server, oldest first. */
async function sessionsOf(service: TestService, logins: string[]): Promise<number[]> {
  const rows = await sql<{ pid: number }>(
    service.postgresUrl,
    "SELECT pid FROM pg_stat_activity WHERE usename = ANY($1) ORDER BY backend_start, pid",
    [logins],
  );
  return rows.map((r) => r.pid);
}

/** Resolves with how long it took for `c`'s session to be ended by the server; rejects after `ms`. */
function endedWithin(c: pg.Client, ms: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the session was still open after ${ms} ms`)), ms);
    c.once("error", () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
}

describe("limits a tenant cannot undo", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      regionSettings: { loginConnectionLimit: 3, databaseConnectionLimit: 4, idleInTransactionTimeoutMs: 1000 },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("ends the surplus sessions of a database whose owner raised its CONNECTION LIMIT, newest first, and restores the limit", async () => {
    const a = await tenant(service, "unlimiter");
    await sql(a.url, `ALTER DATABASE "${a.datname}" CONNECTION LIMIT -1`);
    const second = await mint(service, a.token, a.id);
    const third = await mint(service, a.token, a.id);
    const clients: pg.Client[] = [];
    // As an attacker would: raise the limit again right before each session (a guard pass may put it back meanwhile).
    const raise = () =>
      clients[0]
        ? clients[0].query(`ALTER DATABASE "${a.datname}" CONNECTION LIMIT -1`)
        : sql(a.url, `ALTER DATABASE "${a.datname}" CONNECTION LIMIT -1`);
    const connectPast = async (url: string) => {
      for (let attempt = 0; ; attempt++) {
        await raise();
        try {
          return await connect(url);
        } catch (err) {
          if ((err as { code?: string }).code !== "53300" || attempt > 5) throw err;
        }
      }
    };
    // Three logins of three sessions each: nine, over the database's four (each login stays within its own three).
    for (const url of [a.url, second, third]) for (let i = 0; i < 3; i++) clients.push(await connectPast(url));
    const logins = (await Promise.all(clients.map((c) => c.query<{ u: string }>("SELECT session_user AS u")))).map(
      (r) => r.rows[0]!.u,
    );
    const started = Date.now();
    await eventually(
      async () => expect((await sessionsOf(service, [...new Set(logins)])).length).toBeLessThanOrEqual(4),
      { timeoutMs: 8000 },
    );
    expect(Date.now() - started).toBeLessThan(6000);
    // The oldest four are the ones kept.
    for (const c of clients.slice(0, 4)) expect((await c.query("SELECT 1 AS one")).rows[0].one).toBe(1);
    // Put back in the same pass, just after the sessions were ended.
    await eventually(
      async () =>
        expect(
          (
            await sql<{ limit: number }>(
              service.postgresUrl,
              "SELECT datconnlimit AS limit FROM pg_database WHERE datname = $1",
              [a.datname],
            )
          )[0]!.limit,
        ).toBe(4),
      { timeoutMs: 5000 },
    );
  });

  it("ends a session idle in a transaction after the configured time, whatever it SET", async () => {
    const a = await tenant(service, "idle-escaper");
    const c = await connect(a.url);
    await c.query("SET idle_in_transaction_session_timeout = 0");
    await c.query("BEGIN");
    await c.query("SELECT 1");
    expect(await endedWithin(c, 6000)).toBeLessThan(1000 + 4000);
  });

  it("ends it too when the login's own setting was changed (ALTER ROLE … SET, ALTER DATABASE … SET)", async () => {
    const a = await tenant(service, "role-setter");
    await sql(a.url, "SET ROLE NONE; ALTER ROLE SESSION_USER SET idle_in_transaction_session_timeout = 0");
    await sql(a.url, `ALTER DATABASE "${a.datname}" SET idle_in_transaction_session_timeout = 0`);
    const c = await connect(a.url);
    expect(
      (await c.query("SHOW idle_in_transaction_session_timeout")).rows[0].idle_in_transaction_session_timeout,
    ).toBe("0");
    await c.query("BEGIN");
    await c.query("SELECT 1");
    expect(await endedWithin(c, 6000)).toBeLessThan(1000 + 4000);
  });

  it("keeps guarding every tenant while one keeps its database's catalog row locked", async () => {
    const locker = await tenant(service, "locker");
    const bystander = await tenant(service, "bystander");
    await sql(locker.url, `ALTER DATABASE "${locker.datname}" CONNECTION LIMIT -1`);
    // An open transaction that changed the database's row: whoever else updates that row (the guard putting the
    // limit back) waits for it. Busy, not idle, so no idle timeout ends it.
    const holder = await connect(locker.url);
    await holder.query("BEGIN");
    await holder.query(`ALTER DATABASE "${locker.datname}" CONNECTION LIMIT 7`);
    const sleeping = holder.query("SELECT pg_sleep(60)").catch(() => {});
    await new Promise((r) => setTimeout(r, 2500));
    // The guard still ends another tenant's idle transaction in time.
    const idle = await connect(bystander.url);
    await idle.query("SET idle_in_transaction_session_timeout = 0");
    await idle.query("BEGIN");
    await idle.query("SELECT 1");
    expect(await endedWithin(idle, 8000)).toBeLessThan(1000 + 4000);
    await sql(service.postgresUrl, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", [
      locker.login,
    ]);
    await sleeping;
  });

  it("still deletes a database its owner marked as a template", async () => {
    const a = await tenant(service, "templater");
    await sql(a.url, `ALTER DATABASE "${a.datname}" IS_TEMPLATE true`);
    const api = client(service, a.token);
    expect((await api("DELETE", `/v1/databases/${a.id}`)).status).toBeLessThan(300);
    await eventually(
      async () =>
        expect(
          await sql(service.postgresUrl, "SELECT 1 FROM pg_database WHERE datname = $1", [a.datname]),
        ).toHaveLength(0),
      { timeoutMs: 15_000 },
    );
  });
});

describe("per-workspace caps", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      regionSettings: { loginConnectionLimit: 3, databaseConnectionLimit: 4, workspaceConnectionLimit: 5 },
      service: {
        connectionsPerWorkspace: 4,
        backupsPerWorkspace: 2,
        backupBytesPerWorkspace: 1024 ** 3,
        tenantGuardIntervalMs: 500,
      },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("keeps one workspace's sessions on a server to its cap, however many databases and logins it has", async () => {
    const token = await service.createToken("many-databases");
    const dbs = [
      await database(service, token, "one"),
      await database(service, token, "two"),
      await database(service, token, "three"),
    ];
    const clients: pg.Client[] = [];
    for (const db of dbs) for (let i = 0; i < 3; i++) clients.push(await connect(db.url));
    await eventually(
      async () =>
        expect(
          (
            await sessionsOf(
              service,
              dbs.map((d) => d.login),
            )
          ).length,
        ).toBeLessThanOrEqual(5),
      { timeoutMs: 6000 },
    );
    for (const c of clients.slice(0, 5)) expect((await c.query("SELECT 1 AS one")).rows[0].one).toBe(1);
    // Another workspace is not held back by it.
    const other = await tenant(service, "bystander-sessions");
    const mine = await Promise.all([connect(other.url), connect(other.url), connect(other.url)]);
    for (const c of mine) expect((await c.query("SELECT 1 AS one")).rows[0].one).toBe(1);
  });

  it("refuses to mint a connection past the workspace's cap with 409 naming it", async () => {
    const token = await service.createToken("minter");
    const api = client(service, token);
    const one = await database(service, token, "m1");
    await database(service, token, "m2");
    await mint(service, token, one.id);
    await mint(service, token, one.id);
    // Four live connections now (two databases' first ones and two minted).
    const refused = await api("POST", `/v1/databases/${one.id}/connections`, { name: "fifth" });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("conflict");
    expect(refused.body.error.message).toMatch(/4 live connections, its limit is 4/);
    expect(refused.body.error.hint).toMatch(/revoke/);
    const alsoRefused = await api("POST", "/v1/connections", { databaseId: one.id, name: "fifth" });
    expect(alsoRefused.status).toBe(409);
    // Revoking one makes room again.
    const list = (await api("GET", `/v1/databases/${one.id}/connections`)).body.data as Json[];
    expect((await api("DELETE", `/v1/connections/${list[0].id}`)).status).toBe(204);
    expect((await api("POST", `/v1/databases/${one.id}/connections`, { name: "fifth" })).status).toBe(201);
    // Another workspace mints as before.
    const other = await tenant(service, "bystander-mint");
    await mint(service, other.token, other.id);
  });

  // The byte quota has its own file (tenant-backup-quota.test.ts): a running backup reserves its database's size.
  it("refuses a backup past the workspace's count with 409 naming the limit, and loses none", async () => {
    const counted = await tenant(service, "backup-counter");
    const api = client(service, counted.token);
    const first = await api("POST", `/v1/databases/${counted.id}/backups`);
    const second = await api("POST", `/v1/databases/${counted.id}/backups`);
    expect([first.status, second.status]).toEqual([201, 201]);
    const third = await api("POST", `/v1/databases/${counted.id}/backups`);
    expect(third.status).toBe(409);
    expect(third.body.error.message).toMatch(/2 manual backups, its limit is 2/);
    await eventually(async () => {
      const list = (await api("GET", `/v1/databases/${counted.id}/backups`)).body.data as Json[];
      expect(list.map((b) => b.status)).toEqual(["completed", "completed"]);
    });
  });
});

describe("database settings a tenant chose never break the service", () => {
  it("starts again and serves every tenant after tenants set read-only, timeouts, a role, a search_path and a preload library on their databases", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "mds-settings-"));
    let service = await startTestService({ dir });
    try {
      const tampered = {
        readOnly: await tenant(service, "read-only"),
        timeout: await tenant(service, "timeout"),
        mixed: await tenant(service, "mixed"),
      };
      const bystander = await tenant(service, "bystander");
      await sql(
        tampered.readOnly.url,
        `ALTER DATABASE "${tampered.readOnly.datname}" SET default_transaction_read_only = on`,
      );
      await sql(tampered.timeout.url, `ALTER DATABASE "${tampered.timeout.datname}" SET statement_timeout = 1`);
      const [{ owner }] = (await sql<{ owner: string }>(tampered.mixed.url, "SELECT current_user AS owner")) as [
        { owner: string },
      ];
      for (const setting of [
        `role = '${owner}'`,
        "lock_timeout = 1",
        "search_path = nowhere",
        "idle_in_transaction_session_timeout = 1",
        "local_preload_libraries = 'nothing_here'",
      ]) {
        await sql(tampered.mixed.url, `ALTER DATABASE "${tampered.mixed.datname}" SET ${setting}`);
      }

      await service.stop();
      service = await startTestService({ dir });

      // Every tenant's backups still work (pg_dump logs into the tampered databases), and new work for anyone.
      for (const t of [...Object.values(tampered), bystander]) {
        const api = client(service, t.token);
        const backup = await api("POST", `/v1/databases/${t.id}/backups`);
        expect(backup.status).toBe(201);
        await eventually(
          async () => expect((await api("GET", `/v1/databases/${t.id}/backups`)).body.data[0].status).toBe("completed"),
          { timeoutMs: 20_000 },
        );
        await mint(service, t.token, t.id);
      }
      expect((await sql<{ one: number }>(tampered.readOnly.pooled, "SELECT 1 AS one"))[0]!.one).toBe(1);
      expect((await sql<{ one: number }>(bystander.pooled, "SELECT 1 AS one"))[0]!.one).toBe(1);
      const fresh = await tenant(service, "after-restart");
      expect((await sql<{ one: number }>(fresh.pooled, "SELECT 1 AS one"))[0]!.one).toBe(1);
    } finally {
      await service.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
