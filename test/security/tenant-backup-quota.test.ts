import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// The byte quota under concurrent backups: a backup's bytes counted only once it completed (its size is unknown
// while it runs), so 100 concurrent `POST …/backups` on a big database all passed the byte quota with 0 bytes counted.
// A backup now reserves its database's size when it is requested, until its archive's real size replaces it.

const limit = 20 * 1024 ** 2;

describe("the backup byte quota, and the databases that bound daily backups", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      service: { backupsPerWorkspace: 100, backupBytesPerWorkspace: limit, databasesPerWorkspace: 2 },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("refuses the requests past the limit with 409 naming it, while the ones taken run to completion", async () => {
    const api = client(service, await service.createToken("backup-flood"));
    const created = (await api("POST", "/v1/projects", { name: "flood" })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"));
    const [{ datname }] = (await sql<{ datname: string }>(
      created.database.connections[0].endpoints.direct.connectionString as string,
      "SELECT current_database() AS datname",
    )) as [{ datname: string }];
    const [{ size }] = (await sql<{ size: string }>(service.postgresUrl, "SELECT pg_database_size($1) AS size", [
      datname,
    ])) as [{ size: string }];
    const fits = Math.floor(limit / Number(size));
    expect(fits).toBeGreaterThanOrEqual(1);
    expect(fits).toBeLessThan(20);

    // The backups taken keep running while the flood comes: a table the tenant keeps locked holds their pg_dump.
    const url = created.database.connections[0].endpoints.direct.connectionString as string;
    const holder = new pg.Client({ connectionString: url });
    holder.on("error", () => {});
    await holder.connect();
    await holder.query("CREATE TABLE held (x int)");
    await holder.query("BEGIN");
    await holder.query("LOCK TABLE held IN ACCESS EXCLUSIVE MODE");
    void holder.query("SELECT pg_sleep(60)").catch(() => {});

    const answers = await Promise.all(Array.from({ length: 20 }, () => api("POST", `/v1/databases/${id}/backups`)));
    const taken = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status !== 201);
    expect(taken).toHaveLength(fits);
    for (const r of refused) {
      expect(r.status).toBe(409);
      expect(r.body.error.message).toMatch(new RegExp(`its limit is ${limit} bytes`));
      expect(r.body.error.hint).toMatch(/backupBytesPerWorkspace/);
    }
    const running = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
    expect(running.map((b) => b.status)).toEqual(taken.map(() => "running"));
    await sql(
      service.postgresUrl,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
      [datname],
    );
    await holder.end().catch(() => {});
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(list.map((b) => b.status)).toEqual(taken.map(() => "completed"));
      },
      { timeoutMs: 30_000 },
    );
  });

  it("fails a requested backup in its job, naming the limit, when the database grew past it meanwhile", async () => {
    const api = client(service, await service.createToken("backup-grower"));
    const created = (await api("POST", "/v1/projects", { name: "grower" })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"));
    const url = created.database.connections[0].endpoints.direct.connectionString as string;
    const [{ datname }] = (await sql<{ datname: string }>(url, "SELECT current_database() AS datname")) as [
      { datname: string },
    ];
    // A first backup held by a table lock keeps the second's job waiting behind it (one database's jobs run in order).
    const holder = new pg.Client({ connectionString: url });
    holder.on("error", () => {});
    await holder.connect();
    await holder.query("CREATE TABLE held (x int)");
    await holder.query("BEGIN");
    await holder.query("LOCK TABLE held IN ACCESS EXCLUSIVE MODE");
    void holder.query("SELECT pg_sleep(60)").catch(() => {});
    const first = await api("POST", `/v1/databases/${id}/backups`);
    const second = await api("POST", `/v1/databases/${id}/backups`);
    expect([first.status, second.status]).toEqual([201, 201]);
    // Accepted at ~7.5 MB each; now the database grows past the limit on its own.
    // Rows of 1,440 hex characters: under the size PostgreSQL compresses (TOAST), so ~22 MB on disk.
    await sql(
      url,
      "CREATE TABLE big AS SELECT (SELECT string_agg(md5(i::text || '-' || j::text), '') FROM generate_series(1, 45) AS j) AS v FROM generate_series(1, 15000) AS i",
    );
    await sql(
      service.postgresUrl,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
      [datname],
    );
    await holder.end().catch(() => {});
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(Object.fromEntries(list.map((b) => [b.id, b.status]))).toEqual({
          [first.body.data.id]: "completed",
          [second.body.data.id]: "failed",
        });
      },
      { timeoutMs: 30_000 },
    );
    const [job] = await sql<{ error: string }>(
      service.controlUrl,
      "SELECT error FROM jobs WHERE kind = 'backup' AND payload->>'backupId' = $1",
      [second.body.data.id],
    );
    expect(job!.error).toMatch(new RegExp(`its limit is ${limit} bytes.*grew after the backup was requested`));
  });

  // Daily backups are never refused; each live database has one a day. The databases of a workspace are capped, so
  // that what its daily backups can take is bounded too (and so are its first connections, which are never refused).
  it("refuses a database past the workspace's cap with 409 naming it, project or not, and makes room on delete", async () => {
    const api = client(service, await service.createToken("database-hoarder"));
    const project = (await api("POST", "/v1/projects", { name: "one" })).body.data;
    expect((await api("POST", `/v1/projects/${project.id}/databases`, { name: "two" })).status).toBe(201);
    for (const refused of [
      await api("POST", `/v1/projects/${project.id}/databases`, { name: "three" }),
      await api("POST", "/v1/databases", { projectId: project.id }),
      await api("POST", "/v1/projects", { name: "another" }),
    ]) {
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe("conflict");
      expect(refused.body.error.message).toMatch(/this workspace has 2 live databases, its limit is 2/);
      expect(refused.body.error.hint).toMatch(/databasesPerWorkspace/);
    }
    // The refused project was not made either.
    expect(((await api("GET", "/v1/projects")).body.data as Json[]).map((p) => p.name)).toEqual(["one"]);
    const second = ((await api("GET", `/v1/projects/${project.id}/databases`)).body.data as Json[]).find(
      (d) => d.name === "two",
    );
    expect((await api("DELETE", `/v1/databases/${second.id}`)).status).toBe(204);
    expect((await api("POST", `/v1/projects/${project.id}/databases`, { name: "three" })).status).toBe(201);
    // Another workspace is not held back.
    expect(
      (await client(service, await service.createToken("database-bystander"))("POST", "/v1/projects", { name: "b" }))
        .status,
    ).toBe(201);
  });
});
