import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { ConnectionWithSessions, dataOf, newId } from "../../src/contract/index.ts";
import { startPostgres, templateCluster } from "../../src/postgres/index.ts";
import { openSessionsOf } from "../../src/service/placement/provisioner.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "./helpers.ts";

// GET /v1/connections/{id} carries `openSessions` (our extension): how many client sessions use the connection's
// login now, on the real server and through the real PgBouncer in front of it (transaction mode). A server
// connection PgBouncer keeps in its pool after the client left is not a session; another workspace learns nothing.

let service: TestService;
let a: ReturnType<typeof client>;
let b: ReturnType<typeof client>;

async function readyConnection(api: ReturnType<typeof client>, name: string): Promise<Json> {
  const created = await api("POST", "/v1/projects", { name });
  expect(created.status).toBe(201);
  const db = created.body.data.database;
  await eventually(async () => expect((await api("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready"), {
    timeoutMs: 60_000,
  });
  return db.connections[0];
}

/** A session that stays open until the test ends (or `end()`). */
async function open(connectionString: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString, connectionTimeoutMillis: 10_000 });
  c.on("error", () => {});
  await c.connect();
  await c.query("SELECT 1");
  onTestFinished(() => c.end().catch(() => {}));
  return c;
}

const sessionsOf = async (api: ReturnType<typeof client>, id: string): Promise<number | undefined> => {
  const res = await api("GET", `/v1/connections/${id}`);
  expect(res.status).toBe(200);
  return dataOf(ConnectionWithSessions).parse(res.body).data.openSessions;
};

beforeAll(async () => {
  service = await startTestService();
  a = client(service, service.token);
  b = client(service, await service.createToken("sessions-other"));
}, 120_000);

afterAll(async () => {
  await service?.stop();
});

describe("openSessions on GET /v1/connections/{id}", () => {
  it("counts direct and pooled clients, not the server connection PgBouncer keeps after its client left", async () => {
    const connection = await readyConnection(a, "sessions");
    expect(await sessionsOf(a, connection.id)).toBe(0);
    const direct = await open(connection.endpoints.direct.connectionString);
    expect(await sessionsOf(a, connection.id)).toBe(1);
    const pooled = await open(connection.endpoints.pooled.connectionString);
    expect(await sessionsOf(a, connection.id)).toBe(2);
    await pooled.end();
    // PgBouncer keeps the login's server connection for server_idle_timeout: a backend of the login, no app's.
    const user = decodeURIComponent(new URL(connection.endpoints.direct.connectionString).username);
    const backends = await sql<{ n: number }>(
      service.postgresUrl,
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1",
      [user],
    );
    expect(backends[0]!.n).toBe(2);
    await eventually(async () => expect(await sessionsOf(a, connection.id)).toBe(1));
    await direct.end();
    // A closed session leaves pg_stat_activity a moment after the client's end.
    await eventually(async () => expect(await sessionsOf(a, connection.id)).toBe(0));
    // Lists never carry it (a query of the server per connection).
    const list = await a("GET", `/v1/databases/${connection.database.id}/connections`);
    expect(list.body.data[0]).not.toHaveProperty("openSessions");
  });

  it("behind a pooler this process does not run, no number is true: none is given; without a pooler, sessions are backends", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "mds-sessions-"));
    const postgres = await startPostgres({ dir, template: await templateCluster(), settings: { fsync: "off" } });
    const server = new pg.Pool({ connectionString: postgres.url, max: 1 });
    try {
      await server.query("CREATE ROLE mds_sessions_login LOGIN PASSWORD 'p'");
      const url = new URL(postgres.url);
      url.username = "mds_sessions_login";
      url.password = "p";
      url.pathname = "/postgres";
      const session = await open(url.toString());
      expect(await openSessionsOf(server, "mds_sessions_login", false)).toBe(1);
      // Its clients between transactions hold no backend: a count of backends could miss every one of them.
      expect(await openSessionsOf(server, "mds_sessions_login", true)).toBeUndefined();
      await session.end();
    } finally {
      await server.end();
      await postgres.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("another workspace's connection is a 404 like a missing one, sessions open or not; a bad id is a 400", async () => {
    const victim = await readyConnection(a, "sessions-victim");
    await open(victim.endpoints.direct.connectionString);
    const foreign = await b("GET", `/v1/connections/${victim.id}`);
    const missingId = newId("connection");
    const missing = await b("GET", `/v1/connections/${missingId}`);
    expect(foreign.status).toBe(404);
    expect(JSON.stringify(foreign.body).replaceAll(victim.id, missingId)).toBe(JSON.stringify(missing.body));
    expect(JSON.stringify(foreign.body)).not.toMatch(/session/i);
    const bad = await a("GET", "/v1/connections/not-a-connection");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_request" });
    expect(bad.body.error.message).toContain("connection id");
    // The attacker's own connection counts only its own login's sessions.
    const own = await readyConnection(b, "sessions-attacker");
    expect(await sessionsOf(b, own.id)).toBe(0);
    expect(await sessionsOf(a, victim.id)).toBe(1);
  });
});
