import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "./helpers.ts";

// Several PostgreSQL servers in one region, on real servers through the real API: each server of
// the embedded stack is its own PostgreSQL with its own data directory, certificate and PgBouncer. Which server a
// database landed on is read from PostgreSQL itself (inet_server_port()) through the connection strings handed out.

let dir: string;
let service: TestService | undefined;
let api: ReturnType<typeof client>;
let projectId: string;
/** What the service logged (info and up), one JSON line each. */
const logged: string[] = [];
const capture = { write: (line: string) => void logged.push(line) };

const ports = () => new Map(service!.servers.map((s) => [s.port, s.name]));
/** The server a connection string reaches, by the port of the PostgreSQL session it opens. */
async function serverOf(url: string): Promise<string | undefined> {
  const [row] = await sql<{ port: number }>(url, "SELECT inet_server_port() AS port");
  return ports().get(row!.port);
}
const superuserUrl = (name: string) => service!.servers.find((s) => s.name === name)!.postgresUrl;

async function settled(id: string): Promise<Json> {
  return eventually(async () => {
    const d = (await api("GET", `/v1/databases/${id}`)).body.data;
    if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
    expect(d.status).toBe("ready");
    return d;
  });
}

type Created = { id: string; direct: string; pooled: string; role: string };
async function createDatabase(body: Record<string, unknown> = {}): Promise<Created> {
  const res = await api("POST", "/v1/databases", { projectId, ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const db = res.body.data;
  await settled(db.id);
  const endpoints = db.connections[0].endpoints;
  return {
    id: db.id,
    direct: endpoints.direct.connectionString,
    pooled: endpoints.pooled.connectionString,
    role: db.connections[0].directConnection.user,
  };
}

async function completedBackup(dbId: string): Promise<string> {
  const created = await api("POST", `/v1/databases/${dbId}/backups`);
  expect(created.status).toBe(201);
  return eventually(async () => {
    const list = (await api("GET", `/v1/databases/${dbId}/backups`)).body.data as Json[];
    const found = list.find((b) => b.id === created.body.data.id);
    expect(found?.status).toBe("completed");
    return found.id as string;
  });
}

async function roleExists(server: string, role: string): Promise<boolean> {
  return (await sql(superuserUrl(server), "SELECT 1 FROM pg_roles WHERE rolname = $1", [role])).length > 0;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-servers-"));
  service = await startTestService({
    dir,
    logger: pino({ level: "info" }, capture),
    servers: [
      { name: "one", maxDatabases: 4 },
      { name: "two", maxDatabases: 4 },
    ],
    service: { spareDatabases: 1 },
  });
  api = client(service, service.token);
  const project = await api("POST", "/v1/projects", { name: "servers", region: "us-east-1", createDatabase: false });
  expect(project.status).toBe(201);
  projectId = project.body.data.id;
});
afterAll(async () => {
  await service?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("several servers in one region", () => {
  const placed: Created[] = [];

  it("places new databases on the server with the most room (ties: the regions file's order), each with its own endpoints", async () => {
    for (let i = 0; i < 4; i++) placed.push(await createDatabase());
    expect(await Promise.all(placed.map((d) => serverOf(d.direct)))).toEqual(["one", "two", "one", "two"]);
    // The pooled endpoint is the PgBouncer of the database's own server, in front of that very server.
    expect(await Promise.all(placed.map((d) => serverOf(d.pooled)))).toEqual(["one", "two", "one", "two"]);
    expect(new URL(placed[0]!.pooled).port).not.toBe(new URL(placed[1]!.pooled).port);
    expect(new URL(placed[0]!.pooled).port).toBe(new URL(placed[2]!.pooled).port);
    // Each decision is logged by name and counts; no admin URL, so no superuser password.
    const placements = logged.map((l) => JSON.parse(l) as Json).filter((l) => l.msg === "placed a new database");
    expect(placements.map((l) => [l.database, l.server])).toEqual(placed.map((d, i) => [d.id, i % 2 ? "two" : "one"]));
    expect(placements[1]).toMatchObject({ region: "us-east-1", databasesOnServer: 0, maxDatabases: 4 });
    for (const { postgresUrl } of service!.servers)
      expect(logged.join("")).not.toContain(new URL(postgresUrl).password);
  });

  it("tenant logins, owner roles and databases exist only on their own server", async () => {
    const [a, b] = placed as [Created, Created];
    expect([await roleExists("one", a.role), await roleExists("two", a.role)]).toEqual([true, false]);
    expect([await roleExists("one", b.role), await roleExists("two", b.role)]).toEqual([false, true]);
    // A connection minted later is made on the database's server too, and its login reaches only that server.
    const minted = await api("POST", `/v1/databases/${b.id}/connections`, { name: "later" });
    expect(minted.status).toBe(201);
    const url = minted.body.data.endpoints.direct.connectionString as string;
    expect(await serverOf(url)).toBe("two");
    const role = minted.body.data.directConnection.user as string;
    expect([await roleExists("one", role), await roleExists("two", role)]).toEqual([false, true]);
    // Usage is read from the database's own server: on another server the database is absent and would read as 0 bytes.
    const usage = await api("GET", `/v1/databases/${b.id}/usage`);
    expect(usage.status).toBe(200);
    expect(usage.body.metrics.storage.used).toBeGreaterThan(0);
    // Revocation too: the login is gone from server two.
    expect((await api("DELETE", `/v1/connections/${minted.body.data.id}`)).status).toBe(204);
    expect(await roleExists("two", role)).toBe(false);
  });

  it("restores a backup of a database on server one into a database on server two, and creates one from it", async () => {
    const [a, b] = placed as [Created, Created];
    await sql(a.direct, "CREATE TABLE items (name text)");
    await sql(a.direct, "INSERT INTO items VALUES ('from server one')");
    const backupId = await completedBackup(a.id);
    await sql(a.direct, "INSERT INTO items VALUES ('after the backup')");
    await sql(b.direct, "CREATE TABLE mine (v int)");

    const res = await api("POST", `/v1/databases/${b.id}/restore`, {
      source: { type: "backup", databaseId: a.id, backupId },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await settled(b.id);
    expect(await serverOf(b.direct)).toBe("two");
    expect(await sql(b.direct, "SELECT name FROM items")).toEqual([{ name: "from server one" }]);
    expect(await sql(b.direct, "SELECT to_regclass('mine') AS t")).toEqual([{ t: null }]);
    // The source is untouched.
    expect(await sql(a.direct, "SELECT count(*)::int AS n FROM items")).toEqual([{ n: 2 }]);

    // Creation from the same backup, placed like any new database: both servers have 2 of 4, so the file's order.
    const fromBackup = await createDatabase({ source: { type: "backup", databaseId: a.id, backupId } });
    placed.push(fromBackup);
    expect(await serverOf(fromBackup.direct)).toBe("one");
    expect(await sql(fromBackup.direct, "SELECT name FROM items")).toEqual([{ name: "from server one" }]);
    // A clone of the database on server one lands on server two (it has the most room now) with the source's data.
    const clone = await createDatabase({ source: { type: "database", databaseId: a.id } });
    placed.push(clone);
    expect(await serverOf(clone.direct)).toBe("two");
    expect(await sql(clone.direct, "SELECT name FROM items ORDER BY name")).toEqual([
      { name: "after the backup" },
      { name: "from server one" },
    ]);
  });

  it("a region whose servers are all full answers 422 region_unavailable saying what to do, and reads as unavailable", async () => {
    // Two places left (one on each server) and five concurrent creations: exactly two get one, never a server's fifth.
    const racing = await Promise.all(Array.from({ length: 5 }, () => api("POST", "/v1/databases", { projectId })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 422, 422, 422]);
    expect(new Set(racing.filter((r) => r.status === 422).map((r) => r.body.error.code))).toEqual(
      new Set(["region_unavailable"]),
    );
    for (const res of racing.filter((r) => r.status === 201)) {
      await settled(res.body.data.id);
      const endpoints = res.body.data.connections[0].endpoints;
      placed.push({
        id: res.body.data.id,
        direct: endpoints.direct.connectionString,
        pooled: endpoints.pooled.connectionString,
        role: res.body.data.connections[0].directConnection.user,
      });
    }
    expect((await Promise.all(placed.slice(6).map((d) => serverOf(d.direct)))).sort()).toEqual(["one", "two"]);
    const full = await api("POST", "/v1/databases", { projectId });
    expect(full.status).toBe(422);
    expect(full.body.error.code).toBe("region_unavailable");
    expect(full.body.error.message).toBe(
      'region "us-east-1" has no room for a new database: every server of it is full or draining',
    );
    // How full each server is counts every workspace's databases: the operator's log has it, the caller not.
    const warned = logged.map((l) => JSON.parse(l) as Json).filter((l) => l.msg.startsWith("a region has no room"));
    expect(warned.at(-1)).toMatchObject({ region: "us-east-1", servers: { one: "4/4", two: "4/4" } });
    expect(full.body.error.hint).toMatch(/another region|add a server|maxDatabases/);
    const regions = (await api("GET", "/v1/regions/postgres")).body.data as Json[];
    expect(regions.find((r) => r.id === "us-east-1").status).toBe("unavailable");
    // Deleting a database makes room on its server again.
    expect((await api("DELETE", `/v1/databases/${placed[1]!.id}`)).status).toBeLessThan(300);
    const again = await createDatabase();
    expect(await serverOf(again.direct)).toBe("two");
  });

  it("after a restart with server one draining: its databases keep working, new ones go elsewhere; a dropped server is refused", async () => {
    // A row from before databases recorded their server: the next start gives it the region's first server.
    await sql(service!.controlUrl, "UPDATE databases SET server = NULL WHERE id = $1", [placed[0]!.id]);
    await service!.stop();
    service = undefined;
    // Server "one" draining, "two" unbounded now.
    service = await startTestService({
      dir,
      servers: [{ name: "one", draining: true }, { name: "two" }],
      service: { spareDatabases: 1 },
    });
    api = client(service, service.token);
    expect(await sql(service.controlUrl, "SELECT server FROM databases WHERE id = $1", [placed[0]!.id])).toEqual([
      { server: "one" },
    ]);
    // (A restarted embedded server listens on a new port: the strings handed out before name the old one.)
    const minted = await api("POST", `/v1/databases/${placed[0]!.id}/connections`, { name: "while-draining" });
    expect(minted.status).toBe(201);
    const url = minted.body.data.endpoints.direct.connectionString as string;
    expect(await serverOf(url)).toBe("one");
    expect(await sql(url, "SELECT count(*)::int AS n FROM items")).toEqual([{ n: 2 }]);
    expect(await serverOf(minted.body.data.endpoints.pooled.connectionString)).toBe("one");
    // Server one has fewer databases, but takes none while draining.
    for (let i = 0; i < 2; i++) expect(await serverOf((await createDatabase()).direct)).toBe("two");

    await service.stop();
    service = undefined;
    // Databases still live on server one: a regions file without it is refused at start, naming the server.
    await expect(startTestService({ dir, servers: [{ name: "two" }] })).rejects.toThrow(
      /us-east-1: the regions file no longer lists server "one" \(\d+ databases\); list it again/,
    );
  });
});
