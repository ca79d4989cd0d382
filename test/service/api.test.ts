import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  CreatedDatabase,
  CreatedProject,
  Connection,
  CreatedConnection,
  Database,
  DatabaseWithCredentials,
  ErrorBody,
  Project,
  dataOf,
  databaseIdPattern,
  maskedPassword,
  pageOf,
  projectIdPattern,
} from "../../src/contract/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, tryConnect, type Json } from "./helpers.ts";

let service: TestService;
let api: ReturnType<typeof client>;

const strictData = <T extends z.ZodType>(schema: T) => dataOf(schema);
function expectNoSecret(body: unknown) {
  const text = JSON.stringify(body);
  // Creation-only fields never appear outside creation responses.
  expect(text).not.toMatch(/"apiKeys"/);
  const data = (body as { data: unknown }).data;
  for (const d of Array.isArray(data) ? data : [data])
    if ((d as { type?: string } | undefined)?.type === "database") expect(d).not.toHaveProperty("directConnection");
  expect(text).not.toMatch(/connectionString/);
  expect(text).not.toMatch(/postgresql:\/\//);
  for (const m of text.matchAll(/"pass":"([^"]*)"/g)) expect(m[1]).toBe(maskedPassword);
}
function expectError(res: { status: number; body: Json }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(ErrorBody.parse(res.body).error.code).toBe(code);
  expect(Object.keys(res.body.error).sort()).toEqual(["code", "hint", "message"]);
}
async function ready(id: string): Promise<Json> {
  return eventually(async () => {
    const res = await api("GET", `/v1/databases/${id}`);
    if (res.body.data.status !== "ready") throw new Error(`status ${res.body.data.status}`);
    return res.body.data;
  });
}

beforeAll(async () => {
  service = await startTestService();
  api = client(service, service.token);
});
afterAll(async () => {
  await service?.stop();
});

describe("projects", () => {
  let project: Json;

  it("POST /v1/projects creates a project with its default database in creation form", async () => {
    const res = await api("POST", "/v1/projects", { name: "shop", region: "eu-central-1" });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const parsed = strictData(CreatedProject).parse(res.body);
    project = parsed.data;
    expect(project.id).toMatch(projectIdPattern);
    expect(project.id).toMatch(/^proj_c[a-z0-9]{24}$/);
    expect(project.url).toBe(`${service.url}/v1/projects/${project.id}`);
    expect(project.defaultRegion).toBe("eu-central-1");
    expect(project.workspace.name).toBe("default");
    const db = project.database;
    expect(db.id).toMatch(databaseIdPattern);
    expect(db.status).toBe("provisioning");
    expect(db.isDefault).toBe(true);
    expect(db.source).toEqual({ type: "empty" });
    expect(db.region).toEqual({ id: "eu-central-1", name: expect.any(String) });
    expect(db).not.toHaveProperty("project");
    expect(db.defaultConnectionId).toBe(db.connections[0].id);
    // The top-level string is the pooled endpoint (PgBouncer): TLS verified with the stack's CA, Prisma's flag.
    expect(db.connectionString).toMatch(
      /^postgresql:\/\/[^:]+:[^@]+@127\.0\.0\.1:\d+\/mds_\w+\?sslmode=require&sslrootcert=\/\S+\/ca\.crt&pgbouncer=true$/,
    );
    expect(db.connections[0].endpoints.direct.connectionString).toMatch(
      /\?sslmode=require&sslrootcert=\/\S+\/ca\.crt$/,
    );
    expect(db.directConnection.pass).not.toBe(maskedPassword);
    expect(db.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // The connection string really connects, and can create tables.
    await ready(db.id);
    await sql(db.connectionString, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)");
    expect(await sql(db.connectionString, "SELECT v FROM t")).toEqual([{ v: 1 }]);
  });

  it("createDatabase: false gives database null; name and region default", async () => {
    const res = await api("POST", "/v1/projects", { createDatabase: false });
    expect(res.status).toBe(201);
    expect(res.body.data.database).toBeNull();
    expect(res.body.data.name).toMatch(/^project-/);
    expect(res.body.data.defaultRegion).toBe("us-east-1");
  });

  it("GET /v1/projects/{id} and the list carry no database field", async () => {
    const one = await api("GET", `/v1/projects/${project.id}`);
    expect(one.status).toBe(200);
    const p = strictData(Project).parse(one.body).data;
    expect(p).not.toHaveProperty("database");
    const list = await api("GET", "/v1/projects?limit=100");
    expect(
      pageOf(Project)
        .parse(list.body)
        .data.map((x) => x.id),
    ).toContain(project.id);
  });

  it("logicalId is unique per workspace: 409 names the existing id; the list filters by it", async () => {
    const first = await api("POST", "/v1/projects", { logicalId: "k8s:inst:ns/one", createDatabase: false });
    expect(first.status).toBe(201);
    const second = await api("POST", "/v1/projects", { logicalId: "k8s:inst:ns/one", createDatabase: false });
    expectError(second, 409, "conflict");
    expect(second.body.error.message).toContain(first.body.data.id);
    const found = await api("GET", `/v1/projects?logicalId=${encodeURIComponent("k8s:inst:ns/one")}`);
    expect(found.body.data.map((p: Json) => p.id)).toEqual([first.body.data.id]);
    // Concurrent creates with one logicalId: exactly one wins.
    const racers = await Promise.all(
      [1, 2, 3].map(() => api("POST", "/v1/projects", { logicalId: "race", createDatabase: false })),
    );
    expect(racers.map((r) => r.status).sort()).toEqual([201, 409, 409]);
  });

  it("DELETE /v1/projects/{id} is 409 while it has databases, 204 after", async () => {
    const p = (await api("POST", "/v1/projects", { name: "to-delete" })).body.data;
    expectError(await api("DELETE", `/v1/projects/${p.id}`), 409, "conflict");
    await ready(p.database.id);
    expect((await api("DELETE", `/v1/databases/${p.database.id}`)).status).toBe(204);
    const del = await api("DELETE", `/v1/projects/${p.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeUndefined();
    expectError(await api("GET", `/v1/projects/${p.id}`), 404, "not_found");
  });
});

describe("databases", () => {
  let project: Json;
  let a: Json; // created through POST /v1/projects/{id}/databases
  let b: Json; // created through POST /v1/databases

  beforeAll(async () => {
    project = (await api("POST", "/v1/projects", { name: "dbs", createDatabase: false })).body.data;
  });

  it("POST /v1/projects/{id}/databases returns the full creation form", async () => {
    const res = await api("POST", `/v1/projects/${project.id}/databases`, { name: "a", isDefault: true });
    expect(res.status).toBe(201);
    a = strictData(CreatedDatabase).parse(res.body).data;
    expect(a.status).toBe("provisioning");
    expect(a.project).toEqual({ id: project.id, url: project.url, name: "dbs" });
    expect(a.region.id).toBe("us-east-1");
    expect(a.apiKeys[0]!.connectionString).toMatch(/^postgresql:\/\//);
    expect(a.connections[0]!.endpoints.direct!.connectionString).toMatch(/^postgresql:\/\//);
    expect(a.connections[0]!.endpoints).not.toHaveProperty("accelerate");
  });

  it("POST /v1/databases returns connection strings in endpoints only", async () => {
    const res = await api("POST", "/v1/databases", { projectId: project.id, name: "b", region: "inherit" });
    expect(res.status).toBe(201);
    b = strictData(DatabaseWithCredentials).parse(res.body).data;
    expect(res.body.data).not.toHaveProperty("apiKeys");
    expect(res.body.data).not.toHaveProperty("connectionString");
    expect(b.isDefault).toBe(false);
  });

  it("GET, list and PATCH carry no usable secret and match the schemas", async () => {
    await ready(a.id);
    await ready(b.id);
    const one = await api("GET", `/v1/databases/${a.id}`);
    expect(strictData(Database).parse(one.body).data.status).toBe("ready");
    expectNoSecret(one.body);
    const perProject = await api("GET", `/v1/projects/${project.id}/databases`);
    expect(
      pageOf(Database)
        .parse(perProject.body)
        .data.map((d) => d.id),
    ).toEqual([a.id, b.id]);
    expect(perProject.body.pagination).toEqual({ nextCursor: null, hasMore: false });
    expectNoSecret(perProject.body);
    const filtered = await api("GET", `/v1/databases?projectId=${project.id}`);
    expect(filtered.body.data.map((d: Json) => d.id)).toEqual([a.id, b.id]);
    expectNoSecret(await api("GET", "/v1/databases"));
    // An unknown project id in the filter gives an empty page.
    const empty = await api("GET", "/v1/databases?projectId=proj_c000000000000000000000000");
    expect(empty.body).toEqual({ data: [], pagination: { nextCursor: null, hasMore: false } });
    const noop = await api("PATCH", `/v1/databases/${a.id}`, {});
    expect(noop.status).toBe(200);
    expect(noop.body.data.name).toBe("a");
    const moved = await api("PATCH", `/v1/databases/${b.id}`, { name: "b2", isDefault: true });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ name: "b2", isDefault: true });
    expectNoSecret(moved.body);
    expect((await api("GET", `/v1/databases/${a.id}`)).body.data.isDefault).toBe(false);
  });

  it("credentials reach only their own database, directly and through the pooler", async () => {
    const urlA = a.connectionString as string;
    const urlB = b.connections[0].endpoints.direct.connectionString as string;
    const directA = a.connections[0].endpoints.direct.connectionString as string;
    expect(await tryConnect(urlA)).toBe(true);
    expect(await tryConnect(urlB)).toBe(true);
    const on = (url: string, database: string) => url.replace(/\/(mds_\w+)\?/, `/${database}?`);
    const dbB = new URL(urlB).pathname.slice(1);
    // Direct: PostgreSQL says insufficient_privilege (no CONNECT on the other database).
    for (const database of [dbB, "postgres", "mds_control"])
      expect(await tryConnect(on(directA, database))).toBe("42501");
    // Pooled: PgBouncer's lookup has nothing for A in B's database (no CONNECT there): refused at authentication, at once.
    const started = Date.now();
    expect(await tryConnect(on(urlA, dbB))).not.toBe(true);
    expect(Date.now() - started).toBeLessThan(5000);
    // Databases the pooler itself cannot open: PgBouncer 1.18 keeps such a login waiting (README), never admits it.
    for (const database of ["postgres", "mds_control"]) {
      const c = new pg.Client({ connectionString: on(urlA, database), connectionTimeoutMillis: 2000 });
      c.on("error", () => {});
      await expect(c.connect().then(() => c.query("SELECT 1"))).rejects.toThrow();
      await c.end().catch(() => {});
    }
  });

  it("connections: mint with credentials, list without, revoke so the role cannot log in", async () => {
    const minted = await api("POST", `/v1/databases/${a.id}/connections`, { name: "app" });
    expect(minted.status).toBe(201);
    const con = strictData(CreatedConnection).parse(minted.body).data;
    const url = con.endpoints.direct!.connectionString;
    expect(await tryConnect(url)).toBe(true);
    // Tables made through one connection are usable through another (all act as the database's owner).
    await sql(url, "CREATE TABLE shared (v int); INSERT INTO shared VALUES (7)");
    expect(await sql(a.connectionString, "SELECT v FROM shared")).toEqual([{ v: 7 }]);
    const list = await api("GET", `/v1/databases/${a.id}/connections`);
    expect(
      pageOf(Connection)
        .parse(list.body)
        .data.map((c) => c.id),
    ).toEqual([a.connections[0].id, con.id]);
    expectNoSecret(list.body);
    const firstPage = await api("GET", `/v1/databases/${a.id}/connections?limit=1`);
    expect(firstPage.body.data.map((c: Json) => c.id)).toEqual([a.connections[0].id]);
    const secondPage = await api(
      "GET",
      `/v1/databases/${a.id}/connections?limit=1&cursor=${firstPage.body.pagination.nextCursor}`,
    );
    expect(secondPage.body).toMatchObject({ data: [{ id: con.id }], pagination: { hasMore: false, nextCursor: null } });
    expectError(await api("GET", `/v1/databases/${a.id}/connections?limit=0`), 400, "invalid_request");
    expect((await api("DELETE", `/v1/connections/${con.id}`)).status).toBe(204);
    expect(["28000", "28P01"]).toContain(await tryConnect(url)); // the role cannot log in
    expect(await tryConnect(a.connectionString)).toBe(true);
    expect(await sql(a.connectionString, "SELECT v FROM shared")).toEqual([{ v: 7 }]);
    expectError(await api("DELETE", `/v1/connections/${con.id}`), 404, "not_found");
  });

  it("concurrent creates and PATCHes moving the default leave exactly one default", async () => {
    const p = (await api("POST", "/v1/projects", { createDatabase: false })).body.data;
    const created = await Promise.all(
      [1, 2, 3, 4].map((i) => api("POST", `/v1/projects/${p.id}/databases`, { name: `d${i}`, isDefault: true })),
    );
    expect(created.map((c) => c.status)).toEqual([201, 201, 201, 201]);
    const patched = await Promise.all(
      created.map((c) => api("PATCH", `/v1/databases/${c.body.data.id}`, { isDefault: true })),
    );
    expect(patched.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const list = await api("GET", `/v1/projects/${p.id}/databases`);
    expect(list.body.data.filter((d: Json) => d.isDefault)).toHaveLength(1);
  });

  it("logicalId is unique per project and filters the list", async () => {
    const first = await api("POST", `/v1/projects/${project.id}/databases`, { logicalId: "k8s:x:ns/db" });
    expect(first.status).toBe(201);
    const again = await api("POST", "/v1/databases", { projectId: project.id, logicalId: "k8s:x:ns/db" });
    expectError(again, 409, "conflict");
    expect(again.body.error.message).toContain(first.body.data.id);
    const found = await api("GET", `/v1/databases?logicalId=${encodeURIComponent("k8s:x:ns/db")}`);
    expect(found.body.data.map((d: Json) => d.id)).toEqual([first.body.data.id]);
  });

  it("a deleted database's logicalId is free again and its lookup finds only the live one", async () => {
    const logicalId = "k8s:x:ns/again";
    const first = await api("POST", "/v1/databases", { projectId: project.id, logicalId });
    expect(first.status).toBe(201);
    expect((await api("DELETE", `/v1/databases/${first.body.data.id}`)).status).toBe(204);
    const gone = await api("GET", `/v1/databases?logicalId=${encodeURIComponent(logicalId)}`);
    expect(gone.body.data).toEqual([]);
    const second = await api("POST", "/v1/databases", { projectId: project.id, logicalId });
    expect(second.status).toBe(201);
    expect(second.body.data.id).not.toBe(first.body.data.id);
    const found = await api("GET", `/v1/databases?logicalId=${encodeURIComponent(logicalId)}`);
    expect(found.body.data.map((d: Json) => d.id)).toEqual([second.body.data.id]);
  });

  it("Idempotency-Key replays the creation response, credentials included, without creating again", async () => {
    const headers = { "idempotency-key": "create-once-1" };
    const count = async () =>
      (await sql<{ n: string }>(service.controlUrl, "SELECT count(*) AS n FROM databases")).at(0)!.n;
    const before = await count();
    const first = await api("POST", `/v1/projects/${project.id}/databases`, { name: "idem" }, headers);
    const replay = await api("POST", `/v1/projects/${project.id}/databases`, { name: "idem" }, headers);
    expect(first.status).toBe(201);
    expect(replay.status).toBe(201);
    expect(replay.body).toEqual(first.body);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(Number(await count())).toBe(Number(before) + 1);
    const other = await api("POST", `/v1/projects/${project.id}/databases`, { name: "different" }, headers);
    expectError(other, 422, "unprocessable");
    // Stored encrypted: the password is not in the control database in clear.
    const stored = await sql<{ response: Buffer }>(
      service.controlUrl,
      "SELECT response FROM idempotency WHERE key = $1",
      ["create-once-1"],
    );
    expect(stored[0]!.response.toString("latin1")).not.toContain(first.body.data.directConnection.pass);
    await ready(first.body.data.id);
    expect(await tryConnect(replay.body.data.connectionString)).toBe(true);
  });

  it("DELETE drops the PostgreSQL database and its roles; the default database is 409 while others exist", async () => {
    const current = (await api("GET", `/v1/databases/${b.id}`)).body.data;
    expect(current.isDefault).toBe(true);
    expectError(await api("DELETE", `/v1/databases/${b.id}`), 409, "conflict");
    const url = a.connectionString as string;
    const pgName = new URL(url).pathname.slice(1);
    const role = decodeURIComponent(new URL(url).username);
    expect((await api("DELETE", `/v1/databases/${a.id}`)).status).toBe(204);
    expectError(await api("GET", `/v1/databases/${a.id}`), 404, "not_found");
    await eventually(async () => {
      expect(await sql(service.postgresUrl, "SELECT 1 FROM pg_database WHERE datname = $1", [pgName])).toEqual([]);
      expect(
        await sql(service.postgresUrl, "SELECT 1 FROM pg_roles WHERE rolname = ANY($1)", [[role, `${pgName}_owner`]]),
      ).toEqual([]);
    });
    // Direct: the server says the database is gone at once (through PgBouncer 1.18 such a login waits: README).
    expect(await tryConnect(a.connections[0].endpoints.direct.connectionString as string)).not.toBe(true);
  });
});

describe("pagination", () => {
  it("walks every item that existed for the whole walk exactly once during concurrent creates and deletes", async () => {
    const project = (await api("POST", "/v1/projects", { createDatabase: false })).body.data;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++)
      ids.push((await api("POST", `/v1/projects/${project.id}/databases`, { name: `p${i}` })).body.data.id);
    const deletable = ids.splice(6, 3); // these get deleted during the walk
    const seen: string[] = [];
    let cursor: string | null = null;
    let page = 0;
    do {
      const res: Json = await api(
        "GET",
        `/v1/projects/${project.id}/databases?limit=2${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(res.status).toBe(200);
      seen.push(...res.body.data.map((d: Json) => d.id));
      cursor = res.body.pagination.nextCursor;
      expect(typeof cursor === "string").toBe(res.body.pagination.hasMore);
      // Writes between pages: new databases, and deletions.
      if (page < 3) await api("POST", `/v1/projects/${project.id}/databases`, { name: `new${page}` });
      if (page === 1) for (const id of deletable) await api("DELETE", `/v1/databases/${id}`);
      page++;
    } while (cursor);
    for (const id of ids) expect(seen.filter((s) => s === id)).toHaveLength(1);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("a walk racing a concurrent writer sees every pre-existing item exactly once and no duplicates", async () => {
    const project = (await api("POST", "/v1/projects", { createDatabase: false })).body.data;
    const before = (
      await Promise.all(
        Array.from({ length: 10 }, (_, i) => api("POST", `/v1/projects/${project.id}/databases`, { name: `c${i}` })),
      )
    ).map((r) => r.body.data.id as string);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing && i < 15; i++)
        await api("POST", `/v1/projects/${project.id}/databases`, { name: `w${i}` });
    })();
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: Json = await api(
        "GET",
        `/v1/databases?projectId=${project.id}&limit=1${cursor ? `&cursor=${cursor}` : ""}`,
      );
      seen.push(...res.body.data.map((d: Json) => d.id));
      cursor = res.body.pagination.nextCursor;
    } while (cursor);
    writing = false;
    await writer;
    for (const id of before) expect(seen.filter((s) => s === id)).toHaveLength(1);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it.each(["0", "101", "abc", "1.5", "-1", ""])("limit=%s is 400", async (limit) => {
    expectError(await api("GET", `/v1/databases?limit=${limit}`), 400, "invalid_request");
  });

  it.each(["not-base64!", "Zm9v", Buffer.from("2024-01-01T00:00:00.000000Z|db_x'; drop").toString("base64url")])(
    "cursor %s is 400",
    async (cursor) => {
      expectError(await api("GET", `/v1/databases?cursor=${encodeURIComponent(cursor)}`), 400, "invalid_request");
    },
  );

  it("an unknown query parameter is 400", async () => {
    expectError(await api("GET", "/v1/databases?limt=5"), 400, "invalid_request");
  });
});
