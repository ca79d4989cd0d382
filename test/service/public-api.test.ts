import { readdir } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Connection,
  CreatedConnection,
  CreatedProject,
  Database,
  DatabaseWithCredentials,
  dataOf,
  pageOf,
} from "../../src/contract/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, tryConnect, withDatabase } from "./helpers.ts";

// The public API's requests our service accepts too (src/contract/PUBLIC-API.md): clone source, PATCH logicalId,
// /v1/connections, rotate, regions, usage. Real PostgreSQL, real HTTP.

let service: TestService;
let raw: ReturnType<typeof client>;
let foreign: ReturnType<typeof client>;

// The public form of a created or rotated connection: the creation form plus a top-level connection string.
const IssuedConnection = CreatedConnection.extend({ connectionString: z.string() });

beforeAll(async () => {
  service = await startTestService();
  raw = client(service, service.token);
  foreign = client(service, await service.createToken("other-team"));
});
afterAll(async () => {
  await service?.stop();
});

async function readyProject(name: string) {
  const project = dataOf(CreatedProject).parse(
    (await raw("POST", "/v1/projects", { name, region: "us-east-1" })).body,
  ).data;
  const db = project.database!;
  await eventually(async () => expect((await raw("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready"));
  return { project, db };
}

async function readyDatabase(id: string) {
  return eventually(async () => {
    const got = dataOf(Database).parse((await raw("GET", `/v1/databases/${id}`)).body).data;
    expect(got.status).toBe("ready");
    return got;
  });
}

/** An open session (its end by the server must not crash the test process). */
async function openSession(url: string) {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  c.on("error", () => {});
  await c.connect();
  await c.query("SELECT 1");
  return { client: c };
}

describe("public API: clone a database (source: database)", () => {
  it("copies the source's data into the new database and leaves the source untouched", async () => {
    const { project, db: source } = await readyProject("clone-src");
    await sql(
      source.connectionString,
      "CREATE TABLE items (id int PRIMARY KEY, v text); INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 500) g",
    );

    const created = await raw("POST", "/v1/databases", {
      projectId: project.id,
      name: "copy",
      region: "inherit",
      source: { type: "database", databaseId: source.id },
    });
    expect(created.status).toBe(201);
    const clone = dataOf(DatabaseWithCredentials).parse(created.body).data;
    expect(clone.source).toEqual({ type: "database", databaseId: source.id });
    expect(clone.region.id).toBe("us-east-1");
    await readyDatabase(clone.id);
    expect(dataOf(Database).parse((await raw("GET", `/v1/databases/${clone.id}`)).body).data.source).toEqual({
      type: "database",
      databaseId: source.id,
    });

    const cloneUrl = clone.connections[0]!.endpoints.direct!.connectionString;
    expect(await sql(cloneUrl, "SELECT count(*)::int AS n, max(v) AS top FROM items")).toEqual([
      { n: 500, top: "v99" },
    ]);
    // The copy is the clone's own: writing it (as its owner) changes nothing in the source.
    await sql(cloneUrl, "DELETE FROM items WHERE id > 10; ALTER TABLE items ADD COLUMN extra int");
    expect(await sql(source.connectionString, "SELECT count(*)::int AS n FROM items")).toEqual([{ n: 500 }]);
    expect(
      await sql(
        source.connectionString,
        "SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'items'",
      ),
    ).toEqual([{ n: 2 }]);
    // The intermediate dump is not left behind.
    expect(await readdir(path.join(service.dir, "backups", clone.id)).catch(() => [])).toEqual([]);
  });

  it("a clone attempt that failed after its database was made starts over from an empty database", async () => {
    const { project, db: source } = await readyProject("clone-retry");
    await sql(source.connectionString, "CREATE TABLE items (id int PRIMARY KEY); INSERT INTO items VALUES (1), (2)");
    const admin = (database: string) => withDatabase(service.postgresUrl, database);
    // PostgreSQL names are random (src/service/placement/pg-names.ts): the control database records them.
    const pgNameOf = async (id: string): Promise<string> =>
      (await controlQuery("SELECT pg_name FROM databases WHERE id = $1", [id])).rows[0].pg_name;
    const sourcePg = await pgNameOf(source.id);
    // pg_dump cannot reach the source: every clone attempt fails after creating the new database.
    await sql(admin("postgres"), `ALTER DATABASE ${sourcePg} ALLOW_CONNECTIONS false`);
    try {
      const clone = dataOf(DatabaseWithCredentials).parse(
        (
          await raw("POST", "/v1/databases", {
            projectId: project.id,
            source: { type: "database", databaseId: source.id },
          })
        ).body,
      ).data;
      const jobOf = `SELECT j.id FROM jobs j WHERE j.target_id = $1 AND j.kind = 'provision'`;
      const clonePg = await pgNameOf(clone.id);
      await eventually(async () =>
        expect(
          (await controlQuery(`SELECT error FROM jobs WHERE target_id = $1 AND kind = 'provision'`, [clone.id])).rows[0]
            .error,
        ).toBeTruthy(),
      );
      // What a crashed or failed attempt can leave: objects in the half-made database, one of them in the source's way.
      const injectedAt = await eventually(async () => {
        await sql(
          admin(clonePg),
          "CREATE TABLE IF NOT EXISTS junk (v int); CREATE TABLE IF NOT EXISTS items (other text)",
        );
        return (await controlQuery("SELECT now() AS t", [])).rows[0].t as Date;
      });
      // An attempt that started after the leftovers were made has run (and failed again on the source).
      await eventually(async () => {
        const { rows } = await controlQuery(
          `SELECT count(*)::int AS n FROM job_runs WHERE job_id = (${jobOf}) AND started_at > $2 AND finished_at IS NOT NULL`,
          [clone.id, injectedAt],
        );
        expect(rows[0].n).toBeGreaterThan(0);
      });
      await sql(admin("postgres"), `ALTER DATABASE ${sourcePg} ALLOW_CONNECTIONS true`);
      await readyDatabase(clone.id);
      const url = clone.connections[0]!.endpoints.direct!.connectionString;
      expect(await sql(url, "SELECT id FROM items ORDER BY id")).toEqual([{ id: 1 }, { id: 2 }]);
      expect(await sql(url, "SELECT to_regclass('junk') AS junk")).toEqual([{ junk: null }]);
    } finally {
      await sql(admin("postgres"), `ALTER DATABASE ${sourcePg} ALLOW_CONNECTIONS true`);
    }
  });

  it("also through POST /v1/projects/{id}/databases; a foreign or unknown source is 404, a source not ready 422", async () => {
    const { project, db: source } = await readyProject("clone-src-2");
    const viaProject = await raw("POST", `/v1/projects/${project.id}/databases`, {
      source: { type: "database", databaseId: source.id },
    });
    expect(viaProject.status).toBe(201);

    const other = dataOf(CreatedProject).parse(
      (await foreign("POST", "/v1/projects", { name: "theirs", region: "us-east-1" })).body,
    ).data;
    const stolen = await raw("POST", "/v1/databases", {
      projectId: project.id,
      source: { type: "database", databaseId: other.database!.id },
    });
    const missing = await raw("POST", "/v1/databases", {
      projectId: project.id,
      source: { type: "database", databaseId: "db_c000000000000000000000000" },
    });
    expect(stolen.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(stolen.body.error.message.replace(other.database!.id, "ID")).toBe(
      missing.body.error.message.replace("db_c000000000000000000000000", "ID"),
    );

    // A source that is not ready has no data to copy (its status is set directly: no timing involved).
    await controlQuery("UPDATE databases SET status = 'failure' WHERE id = $1", [source.id]);
    const notReady = await raw("POST", "/v1/databases", {
      projectId: project.id,
      name: "from-failed",
      source: { type: "database", databaseId: source.id },
    });
    expect(notReady.status).toBe(422);
    expect(notReady.body.error).toMatchObject({
      code: "unprocessable",
      message: `database "${source.id}" is failure, not ready, and cannot be cloned`,
    });
    const names = pageOf(Database)
      .parse((await raw("GET", `/v1/databases?projectId=${project.id}`)).body)
      .data.map((d) => d.name);
    expect(names).not.toContain("from-failed");
  });

  it("rejects malformed branch fields and a malformed source with a precise 400", async () => {
    const { project } = await readyProject("clone-bad");
    const branch = await raw("POST", "/v1/databases", { projectId: project.id, branchId: "br 1" });
    expect(branch.status).toBe(400);
    expect(branch.body.error.message).toMatch(/^invalid request body: branchId: must match/);
    const gitName = await raw("PATCH", `/v1/databases/${project.database!.id}`, { branchGitName: null });
    expect(gitName.status).toBe(400);
    expect(gitName.body.error.message).toContain("branchGitName: must be a string");
    const badSource = await raw("POST", "/v1/databases", {
      projectId: project.id,
      source: { type: "database", databaseId: "not an id" },
    });
    expect(badSource.status).toBe(400);
    expect(badSource.body.error.message).toContain("source.databaseId");
    const extra = await raw("POST", "/v1/databases", {
      projectId: project.id,
      source: { type: "database", databaseId: project.database!.id, backupId: "bkp_c123456789" },
    });
    expect(extra.status).toBe(400);
    expect(extra.body.error.message).toContain('unknown field "source.backupId"');
  });
});

describe("public API: PATCH logicalId", () => {
  it("sets and changes a database's logicalId, unique per project (409 names the holder)", async () => {
    const { project, db } = await readyProject("patch-lid");
    const second = dataOf(DatabaseWithCredentials).parse(
      (await raw("POST", "/v1/databases", { projectId: project.id, name: "b", logicalId: "app/b" })).body,
    ).data;

    const set = await raw("PATCH", `/v1/databases/${db.id}`, { logicalId: "app/a" });
    expect(set.status).toBe(200);
    expect(dataOf(Database).parse(set.body).data.logicalId).toBe("app/a");
    expect(
      pageOf(Database)
        .parse((await raw("GET", `/v1/databases?logicalId=app%2Fa`)).body)
        .data.map((d) => d.id),
    ).toEqual([db.id]);
    // The same value again is a no-op, not a conflict with itself.
    expect((await raw("PATCH", `/v1/databases/${db.id}`, { logicalId: "app/a" })).status).toBe(200);

    const taken = await raw("PATCH", `/v1/databases/${db.id}`, { logicalId: "app/b", name: "not-applied" });
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toContain(second.id);
    // Nothing of the refused PATCH was applied.
    expect(dataOf(Database).parse((await raw("GET", `/v1/databases/${db.id}`)).body).data).toMatchObject({
      logicalId: "app/a",
      name: db.name,
    });

    // Unique per project only: another project may use it.
    const other = await readyProject("patch-lid-2");
    expect((await raw("PATCH", `/v1/databases/${other.db.id}`, { logicalId: "app/b" })).status).toBe(200);
    // Bad input, foreign id.
    expect((await raw("PATCH", `/v1/databases/${db.id}`, { logicalId: "has space" })).status).toBe(400);
    expect((await foreign("PATCH", `/v1/databases/${db.id}`, { logicalId: "x" })).status).toBe(404);
  });

  it("two concurrent PATCHes racing for one logicalId: one wins, the other is 409", async () => {
    const { project, db } = await readyProject("patch-race");
    const b = dataOf(DatabaseWithCredentials).parse(
      (await raw("POST", "/v1/databases", { projectId: project.id, name: "b" })).body,
    ).data;
    const results = await Promise.all([
      raw("PATCH", `/v1/databases/${db.id}`, { logicalId: "race" }),
      raw("PATCH", `/v1/databases/${b.id}`, { logicalId: "race" }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
  });
});

describe("public API: /v1/connections", () => {
  it("creates with databaseId (201, credentials once), gets, lists by databaseId, and isolates workspaces", async () => {
    const { project, db } = await readyProject("conns");
    const other = dataOf(DatabaseWithCredentials).parse(
      (await raw("POST", "/v1/databases", { projectId: project.id, name: "other" })).body,
    ).data;

    const created = await raw("POST", "/v1/connections", { databaseId: db.id, name: "ci" });
    expect(created.status).toBe(201);
    const conn = dataOf(IssuedConnection).parse(created.body).data;
    expect(created.body.data).toMatchObject({ host: null, user: null, pass: null });
    expect(conn.connectionString).toBe(conn.endpoints.pooled!.connectionString);
    expect(await tryConnect(conn.endpoints.direct!.connectionString)).toBe(true);

    const got = await raw("GET", `/v1/connections/${conn.id}`);
    expect(got.status).toBe(200);
    const read = dataOf(Connection).parse(got.body).data;
    expect(read).toMatchObject({ id: conn.id, name: "ci", database: { id: db.id } });
    expect(JSON.stringify(got.body)).not.toContain("postgresql://");

    const byDb = pageOf(Connection).parse((await raw("GET", `/v1/connections?databaseId=${db.id}`)).body);
    expect(byDb.data.map((c) => c.id)).toEqual([db.connections[0]!.id, conn.id]);
    const all = pageOf(Connection)
      .parse((await raw("GET", "/v1/connections?limit=100")).body)
      .data.map((c) => c.id);
    expect(all).toEqual(expect.arrayContaining([db.connections[0]!.id, conn.id, other.connections[0]!.id]));
    const paged = pageOf(Connection).parse((await raw("GET", `/v1/connections?databaseId=${db.id}&limit=1`)).body);
    expect(paged.pagination.hasMore).toBe(true);
    const rest = pageOf(Connection).parse(
      (
        await raw(
          "GET",
          `/v1/connections?databaseId=${db.id}&cursor=${encodeURIComponent(paged.pagination.nextCursor!)}`,
        )
      ).body,
    );
    expect([...paged.data, ...rest.data].map((c) => c.id)).toEqual([db.connections[0]!.id, conn.id]);

    // Another workspace: the connection and the database do not exist for it.
    expect((await foreign("GET", `/v1/connections/${conn.id}`)).status).toBe(404);
    expect((await foreign("POST", "/v1/connections", { databaseId: db.id, name: "x" })).status).toBe(404);
    expect((await foreign("POST", `/v1/connections/${conn.id}/rotate`)).status).toBe(404);
    expect((await foreign("DELETE", `/v1/connections/${conn.id}`)).status).toBe(404);
    expect(pageOf(Connection).parse((await foreign("GET", `/v1/connections?databaseId=${db.id}`)).body).data).toEqual(
      [],
    );
    expect(
      pageOf(Connection)
        .parse((await foreign("GET", "/v1/connections")).body)
        .data.map((c) => c.id),
    ).not.toContain(conn.id);
    // A foreign id answers exactly like a missing one.
    const missing = await raw("GET", "/v1/connections/con_c000000000000000000000000");
    const hidden = await foreign("GET", `/v1/connections/${conn.id}`);
    expect(hidden.body.error.message.replace(conn.id, "ID")).toBe(
      missing.body.error.message.replace("con_c000000000000000000000000", "ID"),
    );
  });

  it("POST /v1/connections with an Idempotency-Key mints once and replays the same credentials", async () => {
    const { db } = await readyProject("conns-idem");
    const headers = { "idempotency-key": "conn-once" };
    const first = await raw("POST", "/v1/connections", { databaseId: db.id, name: "once" }, headers);
    const again = await raw("POST", "/v1/connections", { databaseId: db.id, name: "once" }, headers);
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(
      pageOf(Connection)
        .parse((await raw("GET", `/v1/connections?databaseId=${db.id}`)).body)
        .data.map((c) => c.name),
    ).toEqual(["default", "once"]);
    expect((await raw("POST", "/v1/connections", { databaseId: db.id, name: "different" }, headers)).status).toBe(422);
  });

  it("answers bad input with a precise 400 and changes nothing", async () => {
    const { db } = await readyProject("conns-bad");
    const cases: [string, string, unknown, string][] = [
      ["POST", "/v1/connections", { name: "x" }, "databaseId"],
      ["POST", "/v1/connections", { databaseId: db.id }, "name"],
      ["POST", "/v1/connections", { databaseId: "bad id", name: "x" }, "databaseId"],
      ["POST", "/v1/connections", { databaseId: db.id, name: "x", kind: "postgres" }, 'unknown field "kind"'],
      ["GET", "/v1/connections?databaseId=bad%20id", undefined, "databaseId"],
      ["GET", "/v1/connections?limit=0", undefined, "limit"],
      ["GET", "/v1/connections/not%20an%20id", undefined, "invalid connection id"],
      ["POST", "/v1/connections/con_c000000000000000000000000/rotate", { force: true }, 'unknown field "force"'],
    ];
    for (const [method, path, body, needle] of cases) {
      const res = await raw(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.error.message, `${method} ${path}`).toContain(needle);
    }
    expect(pageOf(Connection).parse((await raw("GET", `/v1/connections?databaseId=${db.id}`)).body).data).toHaveLength(
      1,
    );
  });
});

describe("public API: rotate and revoke end the old credentials", () => {
  it("rotate: same connection, new password works, the old one stops and its open session is terminated", async () => {
    const { db } = await readyProject("rotate");
    const oldUrl = db.connections[0]!.endpoints.direct!.connectionString;
    const session = await openSession(oldUrl);
    try {
      const rotated = await raw("POST", `/v1/connections/${db.connections[0]!.id}/rotate`);
      expect(rotated.status).toBe(200);
      const conn = dataOf(IssuedConnection).parse(rotated.body).data;
      expect(conn.id).toBe(db.connections[0]!.id);
      const newUrl = conn.endpoints.direct!.connectionString;
      expect(newUrl).not.toBe(oldUrl);

      // The open session of the old password is gone by the time the API answered.
      await expect(session.client.query("SELECT 1")).rejects.toThrow();
      expect(await tryConnect(oldUrl)).toBe("28P01");
      expect(await tryConnect(newUrl)).toBe(true);
      // Objects still belong to the owner: the rotated login keeps its tables.
      await sql(newUrl, "CREATE TABLE kept (v int)");
      expect(await sql(newUrl, "SELECT count(*)::int AS n FROM kept")).toEqual([{ n: 0 }]);
      // GET shows no secret after a rotation either.
      expect(JSON.stringify((await raw("GET", `/v1/connections/${conn.id}`)).body)).not.toContain("postgresql://");
    } finally {
      await session.client.end().catch(() => {});
    }
  });

  it("rotate with an Idempotency-Key replays the same credentials without rotating again", async () => {
    const { db } = await readyProject("rotate-idem");
    const path = `/v1/connections/${db.connections[0]!.id}/rotate`;
    const first = await raw("POST", path, undefined, { "idempotency-key": "rot-1" });
    const again = await raw("POST", path, undefined, { "idempotency-key": "rot-1" });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await tryConnect(first.body.data.endpoints.direct.connectionString)).toBe(true);
  });

  it("rotate while the database is provisioning is 409 and changes nothing; a revoked connection is 404", async () => {
    const { project, db } = await readyProject("rotate-prov");
    // The status is set directly (its provisioning is over, nothing acts on it): no timing involved.
    await controlQuery("UPDATE databases SET status = 'provisioning' WHERE id = $1", [db.id]);
    const res = await raw("POST", `/v1/connections/${db.connections[0]!.id}/rotate`);
    await controlQuery("UPDATE databases SET status = 'ready' WHERE id = $1", [db.id]);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain("provisioning");
    expect(await tryConnect(db.connections[0]!.endpoints.direct!.connectionString)).toBe(true);
    const conn = dataOf(IssuedConnection).parse(
      (await raw("POST", "/v1/connections", { databaseId: project.database!.id, name: "gone" })).body,
    ).data;
    expect((await raw("DELETE", `/v1/connections/${conn.id}`)).status).toBe(204);
    expect((await raw("POST", `/v1/connections/${conn.id}/rotate`)).status).toBe(404);
    expect((await raw("GET", `/v1/connections/${conn.id}`)).status).toBe(404);
  });

  it("DELETE /v1/connections/{id} terminates the revoked login's open sessions, not only future logins", async () => {
    const { db } = await readyProject("revoke-session");
    const conn = dataOf(IssuedConnection).parse(
      (await raw("POST", "/v1/connections", { databaseId: db.id, name: "doomed" })).body,
    ).data;
    const url = conn.endpoints.direct!.connectionString;
    const session = await openSession(url);
    try {
      expect((await raw("DELETE", `/v1/connections/${conn.id}`)).status).toBe(204);
      await expect(session.client.query("SELECT 1")).rejects.toThrow();
      expect(await tryConnect(url)).not.toBe(true);
      // The database's other connection is untouched.
      expect(await tryConnect(db.connections[0]!.endpoints.direct!.connectionString)).toBe(true);
    } finally {
      await session.client.end().catch(() => {});
    }
  });
});

describe("public API: regions and usage", () => {
  it("GET /v1/regions/postgres lists the six regions, available where the service has a server", async () => {
    const res = await raw("GET", "/v1/regions/postgres");
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(6);
    expect(res.body.data).toContainEqual({
      id: "us-east-1",
      type: "region",
      name: "US East (N. Virginia)",
      status: "available",
    });
    for (const r of res.body.data) expect(["available", "unavailable"]).toContain(r.status);
    expect((await client(service, "nope")("GET", "/v1/regions/postgres")).status).toBe(401);
  });

  it("GET /v1/databases/{id}/usage reports storage and open sessions from the server", async () => {
    const { db } = await readyProject("usage");
    // Direct: a pooled statement would leave PgBouncer's server connections (counted too) open for a minute.
    await sql(
      db.connections[0]!.endpoints.direct!.connectionString,
      "CREATE TABLE big AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 5000) g",
    );
    const session = await openSession(db.connections[0]!.endpoints.direct!.connectionString);
    try {
      // Waits for the sessions of earlier statements to leave and for statistics to be flushed.
      await eventually(async () => {
        const res = await raw("GET", `/v1/databases/${db.id}/usage?startDate=2026-01-01T00:00:00Z`);
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({
          period: { start: "2026-01-01T00:00:00.000Z", end: expect.any(String) },
          metrics: {
            operations: { unit: "ops" },
            storage: { unit: "GiB" },
            connections: { used: 1, unit: "connections" },
          },
          generatedAt: expect.any(String),
        });
        // 5000 rows of 1 KB: at least 5 MB.
        expect(res.body.metrics.storage.used).toBeGreaterThan(5e6 / 1024 ** 3);
        expect(res.body.metrics.operations.used).toBeGreaterThan(0);
      });
    } finally {
      await session.client.end();
    }
    expect((await raw("GET", `/v1/databases/${db.id}/usage?startDate=yesterday`)).status).toBe(400);
    expect(
      (await raw("GET", `/v1/databases/${db.id}/usage?startDate=2026-02-01T00:00:00Z&endDate=2026-01-01T00:00:00Z`))
        .body.error.message,
    ).toContain("endDate");
    expect((await foreign("GET", `/v1/databases/${db.id}/usage`)).status).toBe(404);
  });
});

async function controlQuery(text: string, params: unknown[]) {
  const c = new pg.Client({ connectionString: service.controlUrl });
  await c.connect();
  try {
    return await c.query(text, params);
  } finally {
    await c.end();
  }
}
