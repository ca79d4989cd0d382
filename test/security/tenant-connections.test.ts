import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// One tenant opened 191 connections and the next tenant got "remaining connection slots are reserved": tenant logins
// and databases had no connection limit, and a transaction left open held its locks and snapshot forever.

let service: TestService;
const open: pg.Client[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  service = await startTestService({
    regionSettings: { loginConnectionLimit: 3, databaseConnectionLimit: 5, idleInTransactionTimeoutMs: 300 },
  });
});
afterAll(async () => {
  for (const c of open) await c.end().catch(() => {});
  await service?.stop();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  open.push(c);
  return c;
}

async function readyDatabase(token: string, name: string): Promise<{ id: string; url: string }> {
  const api = client(service, token);
  const created = (await api("POST", "/v1/projects", { name })).body.data;
  await eventually(async () =>
    expect((await api("GET", `/v1/databases/${created.database.id}`)).body.data.status).toBe("ready"),
  );
  // The direct endpoint: these are the server's own limits (through PgBouncer, clients share a bounded pool).
  return { id: created.database.id, url: created.database.connections[0].endpoints.direct.connectionString };
}

async function mint(token: string, databaseId: string): Promise<string> {
  const res = await client(service, token)("POST", `/v1/databases/${databaseId}/connections`, { name: "more" });
  expect(res.status).toBe(201);
  return (res.body.data as Json).endpoints.direct.connectionString;
}

describe("a tenant cannot take every connection slot", () => {
  it("bounds one login and one database, and another tenant still connects", async () => {
    const a = await readyDatabase(service.token, "greedy");
    for (let i = 0; i < 3; i++) await connect(a.url);
    await expect(connect(a.url)).rejects.toThrow(/too many connections for role/);
    // More logins of the same database share the database's bound.
    const second = await mint(service.token, a.id);
    const third = await mint(service.token, a.id);
    await connect(second);
    await connect(second);
    await expect(connect(third)).rejects.toThrow(/too many connections for database/);

    const b = await readyDatabase(await service.createToken("neighbour"), "neighbour");
    const c = await connect(b.url);
    expect((await c.query("SELECT 1 AS one")).rows[0].one).toBe(1);
  });

  it("ends a tenant session left idle inside a transaction", async () => {
    const db = await readyDatabase(service.token, "idler");
    const c = await connect(db.url);
    const ended = new Promise<Error>((resolve) => c.on("error", resolve));
    await c.query("BEGIN");
    await c.query("SELECT 1");
    expect((await ended).message).toMatch(/idle-in-transaction timeout/);
  });

  it("gives databases and logins made before the limits existed the region's limits at start", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "mds-limits-"));
    dirs.push(dir);
    await service.stop();
    service = await startTestService({ dir });
    const db = await readyDatabase(service.token, "older");
    const [{ role, datname }] = (await sql<{ role: string; datname: string }>(
      db.url,
      "SELECT session_user AS role, current_database() AS datname",
    )) as [{ role: string; datname: string }];
    // As an older service left them: no limits at all.
    await sql(service.postgresUrl, `ALTER DATABASE "${datname}" CONNECTION LIMIT -1`);
    await sql(service.postgresUrl, `ALTER ROLE "${role}" CONNECTION LIMIT -1`);
    await sql(service.postgresUrl, `ALTER ROLE "${role}" RESET idle_in_transaction_session_timeout`);
    // The same data under a restarted service (kept: the first service was started on a directory of its own).
    await service.stop();
    service = await startTestService({
      dir,
      regionSettings: { loginConnectionLimit: 3, databaseConnectionLimit: 5, idleInTransactionTimeoutMs: 300 },
    });
    const [d] = await sql<{ limit: number }>(
      service.postgresUrl,
      "SELECT datconnlimit AS limit FROM pg_database WHERE datname = $1",
      [datname],
    );
    const [r] = await sql<{ limit: number; config: string[] }>(
      service.postgresUrl,
      "SELECT rolconnlimit AS limit, rolconfig AS config FROM pg_roles WHERE rolname = $1",
      [role],
    );
    expect(d!.limit).toBe(5);
    expect(r!.limit).toBe(3);
    expect(r!.config).toContain("idle_in_transaction_session_timeout=300");
  });
});
