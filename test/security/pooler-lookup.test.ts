import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, withDatabase, type Json } from "../service/helpers.ts";

// PgBouncer (1.18) runs its auth_query in the database the client names. The lookup returned a login's verifier
// whatever that database was, so tenant A's login, pointed at tenant B's database through the pooler, had its password
// checked and accepted there: only PostgreSQL's later refusal of the server login stopped it. The lookup must answer
// only for a login that may connect to the database it runs in, so A is refused at authentication.

let service: TestService;
let a: Json;
let b: Json;

async function readyProject(token: string, name: string): Promise<Json> {
  const api = client(service, token);
  const project = (await api("POST", "/v1/projects", { name })).body.data;
  await eventually(async () =>
    expect((await api("GET", `/v1/databases/${project.database.id}`)).body.data.status).toBe("ready"),
  );
  return project.database;
}

/** The error a login gets, or "connected". */
async function attempt(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.query("SELECT 1");
    return "connected";
  } catch (err) {
    return (err as Error).message;
  } finally {
    await c.end().catch(() => {});
  }
}

beforeAll(async () => {
  service = await startTestService();
  a = await readyProject(service.token, "tenant-a");
  b = await readyProject(await service.createToken("other-team"), "tenant-b");
}, 120_000);

afterAll(async () => {
  await service?.stop();
});

describe("the pooler's lookup answers only for a database the login may connect to", () => {
  it("the lookup, run as the pooler in B's database, has nothing for A's login, and everything for B's", async () => {
    const loginA = new URL(a.connections[0].endpoints.direct.connectionString).username;
    const loginB = new URL(b.connections[0].endpoints.direct.connectionString).username;
    const databaseB = new URL(b.connections[0].endpoints.direct.connectionString).pathname.slice(1);
    // What PgBouncer's auth_query does: a session of mds_pooler in the database the client named.
    const lookup = async (login: string) => {
      const c = new pg.Client({ connectionString: withDatabase(service.postgresUrl, databaseB) });
      await c.connect();
      try {
        await c.query("SET SESSION AUTHORIZATION mds_pooler");
        return (
          await c.query<{ usename: string }>("SELECT usename FROM pg_catalog.mds_pooler_lookup($1)", [login])
        ).rows.map((r) => r.usename);
      } finally {
        await c.end();
      }
    };
    expect(await lookup(loginB)).toEqual([loginB]);
    expect(await lookup(loginA)).toEqual([]);
  });

  it("A's login through PgBouncer to B's database is refused at authentication; its own still works", async () => {
    const pooledA = a.connectionString as string;
    const databaseB = new URL(b.connectionString as string).pathname.slice(1);
    expect(await attempt(pooledA)).toBe("connected");
    const message = await attempt(withDatabase(pooledA, databaseB));
    // Refused by PgBouncer's own SCRAM check, not by PostgreSQL after PgBouncer had accepted A's password.
    expect(message).not.toMatch(/permission denied/);
    // PgBouncer answers as it does for a login that does not exist: nothing tells A whether its password was right.
    expect(message).toBe("no such user");
    // Direct: PostgreSQL refuses (no CONNECT on B's database), as before.
    expect(
      await attempt(withDatabase(a.connections[0].endpoints.direct.connectionString as string, databaseB)),
    ).toMatch(/permission denied for database/);
  });
});
