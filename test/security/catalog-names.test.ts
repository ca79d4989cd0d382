import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// The catalog is readable by every tenant: pg_database, pg_roles, pg_auth_members, pg_stat_activity. When a database
// was named mds_<id body> and a login mds_<connection id body>, tenant B learned tenant A's database and connection
// ids from there, the very ids A's operator and API calls act on. Names of new databases, owner roles and logins
// must carry nothing of any API id.

let service: TestService;
const idsOfA: string[] = [];
let directB: string;

const api = (token: string) => client(service, token);

async function ready(token: string, id: string): Promise<void> {
  await eventually(
    async () => expect((await api(token)("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"),
    { timeoutMs: 60_000 },
  );
}

/** Every 8 characters in a row of an id's body (after its prefix): its suffixes and everything else one could match on. */
function pieces(id: string): string[] {
  const body = id.slice(id.indexOf("_") + 1).toLowerCase();
  const out = [id.toLowerCase(), body];
  for (let i = 0; i + 8 <= body.length; i++) out.push(body.slice(i, i + 8));
  return out;
}

function leaks(names: string[], ids: string[]): string[] {
  const found: string[] = [];
  for (const name of names)
    for (const id of ids)
      if (pieces(id).some((p) => name.toLowerCase().includes(p))) found.push(`${name} carries ${id}`);
  return found;
}

beforeAll(async () => {
  service = await startTestService();
  const a = api(service.token);
  const project = (await a("POST", "/v1/projects", { name: "victim" })).body.data;
  await ready(service.token, project.database.id);
  const second = (await a("POST", `/v1/projects/${project.id}/databases`, { name: "billing" })).body.data;
  await ready(service.token, second.id);
  const minted = await a("POST", `/v1/databases/${second.id}/connections`, { name: "app" });
  expect(minted.status).toBe(201);
  const clone = await a("POST", "/v1/databases", {
    projectId: project.id,
    source: { type: "database", databaseId: second.id },
  });
  expect(clone.status).toBe(201);
  await ready(service.token, clone.body.data.id);
  const connections = (await a("GET", "/v1/connections")).body.data as Json[];
  idsOfA.push(
    project.id,
    project.database.id,
    second.id,
    clone.body.data.id,
    ...connections.map((c) => c.id as string),
  );
  expect(connections.length).toBeGreaterThanOrEqual(4);

  const otherToken = await service.createToken("team-b");
  const b = (await api(otherToken)("POST", "/v1/projects", { name: "curious" })).body.data;
  await ready(otherToken, b.database.id);
  directB = b.database.connections[0].endpoints.direct.connectionString;
}, 180_000);

afterAll(async () => {
  await service?.stop();
});

describe("PostgreSQL names carry no API id", () => {
  it("tenant B reads every database and role name in the catalog and finds none of A's ids in them", async () => {
    const databases = (await sql<{ n: string }>(directB, "SELECT datname AS n FROM pg_database")).map((r) => r.n);
    const roles = (await sql<{ n: string }>(directB, "SELECT rolname AS n FROM pg_roles")).map((r) => r.n);
    // The catalog does show A's objects (so the check looks at them): A's three databases among them.
    const ownedByA = await sql<{ datname: string }>(
      service.controlUrl,
      "SELECT pg_name AS datname FROM databases WHERE id = ANY($1)",
      [idsOfA],
    );
    expect(ownedByA).toHaveLength(3);
    for (const { datname } of ownedByA) expect(databases).toContain(datname);
    expect(leaks([...databases, ...roles], idsOfA)).toEqual([]);
  });

  it("the names the service records for A's databases, owners and logins carry none of A's ids", async () => {
    const names = await sql<{ n: string }>(
      service.controlUrl,
      `SELECT pg_name AS n FROM databases WHERE id = ANY($1) UNION ALL SELECT owner_role FROM databases WHERE id = ANY($1)
       UNION ALL SELECT role_name FROM connections WHERE database_id = ANY($1)`,
      [idsOfA],
    );
    expect(names.length).toBeGreaterThanOrEqual(3 * 2 + 4);
    expect(
      leaks(
        names.map((r) => r.n),
        idsOfA,
      ),
    ).toEqual([]);
  });
});
