import { createManagementApiClient } from "@prisma/management-api-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { eventually, sql, tryConnect } from "./helpers.ts";

// The public client of this API family, written by nobody here, drives the seed's endpoints unchanged.

let service: TestService;
let sdk: ReturnType<typeof createManagementApiClient>;

beforeAll(async () => {
  service = await startTestService();
  sdk = createManagementApiClient({ token: service.token, baseUrl: service.url });
});
afterAll(async () => {
  await service?.stop();
});

describe("@prisma/management-api-sdk against mds service", () => {
  it("drives all 8 endpoints of the seed", async () => {
    // 1. POST /v1/projects
    const created = await sdk.POST("/v1/projects", { body: { name: "via-sdk", region: "us-east-1" } });
    expect(created.error).toBeUndefined();
    expect(created.response.status).toBe(201);
    const project = created.data!.data;
    const defaultDb = project.database!;
    expect(project.id).toMatch(/^proj_/);
    expect(defaultDb.connectionString).toMatch(/^postgresql:\/\//);

    // 3. POST /v1/projects/{projectId}/databases
    const viaProject = await sdk.POST("/v1/projects/{projectId}/databases", {
      params: { path: { projectId: project.id } },
      body: { name: "second", region: "inherit" },
    });
    expect(viaProject.response.status).toBe(201);
    const second = viaProject.data!.data;

    // 2. POST /v1/databases
    const viaBody = await sdk.POST("/v1/databases", { body: { projectId: project.id, name: "third" } });
    expect(viaBody.response.status).toBe(201);

    // 6. GET /v1/databases/{databaseId}
    await eventually(async () => {
      const got = await sdk.GET("/v1/databases/{databaseId}", { params: { path: { databaseId: defaultDb.id } } });
      expect(got.data!.data.status).toBe("ready");
    });
    await sql(defaultDb.connectionString!, "CREATE TABLE t (v text); INSERT INTO t VALUES ('before')");

    // 4. GET /v1/projects/{projectId}/databases
    const perProject = await sdk.GET("/v1/projects/{projectId}/databases", {
      params: { path: { projectId: project.id }, query: { limit: 2 } },
    });
    expect(perProject.data!.data).toHaveLength(2);
    expect(perProject.data!.pagination.hasMore).toBe(true);
    const next = await sdk.GET("/v1/projects/{projectId}/databases", {
      params: { path: { projectId: project.id }, query: { cursor: perProject.data!.pagination.nextCursor! } },
    });
    expect(next.data!.data).toHaveLength(1);

    // 5. GET /v1/databases
    const all = await sdk.GET("/v1/databases", { params: { query: { projectId: project.id } } });
    expect(all.data!.data.map((d) => d.id).sort()).toEqual([defaultDb.id, second.id, viaBody.data!.data.id].sort());

    // 7. PATCH /v1/databases/{databaseId}
    const patched = await sdk.PATCH("/v1/databases/{databaseId}", {
      params: { path: { databaseId: second.id } },
      body: { name: "renamed" },
    });
    expect(patched.data!.data.name).toBe("renamed");

    // 8. POST /v1/databases/{targetDatabaseId}/restore (with a backup taken through our extension)
    const backup = await fetch(`${service.url}/v1/databases/${defaultDb.id}/backups`, {
      method: "POST",
      headers: { authorization: `Bearer ${service.token}` },
    });
    const backupId = ((await backup.json()) as { data: { id: string } }).data.id;
    await eventually(async () => {
      const list = await fetch(`${service.url}/v1/databases/${defaultDb.id}/backups`, {
        headers: { authorization: `Bearer ${service.token}` },
      });
      expect(((await list.json()) as { data: { status: string }[] }).data[0]!.status).toBe("completed");
    });
    await sql(defaultDb.connectionString!, "UPDATE t SET v = 'after'");
    const restored = await sdk.POST("/v1/databases/{targetDatabaseId}/restore", {
      params: { path: { targetDatabaseId: defaultDb.id } },
      body: { source: { type: "backup", databaseId: defaultDb.id, backupId } },
    });
    expect(restored.response.status).toBe(200);
    expect(restored.data!.data.status).toBe("recovering");
    await eventually(async () => {
      const got = await sdk.GET("/v1/databases/{databaseId}", { params: { path: { databaseId: defaultDb.id } } });
      expect(got.data!.data.status).toBe("ready");
    });
    expect(await sql(defaultDb.connectionString!, "SELECT v FROM t")).toEqual([{ v: "before" }]);
  });

  it("drives the public API's database and connection surface: logicalId, clone, /v1/connections, rotate, regions, usage", async () => {
    const created = await sdk.POST("/v1/projects", { body: { name: "public-surface", region: "us-east-1" } });
    const project = created.data!.data;
    const source = project.database!;
    await eventually(async () =>
      expect(
        (await sdk.GET("/v1/databases/{databaseId}", { params: { path: { databaseId: source.id } } })).data!.data
          .status,
      ).toBe("ready"),
    );
    await sql(source.connectionString!, "CREATE TABLE t (v text); INSERT INTO t VALUES ('source data')");

    // POST /v1/databases with logicalId, region "inherit" and a clone source.
    const cloned = await sdk.POST("/v1/databases", {
      body: {
        projectId: project.id,
        name: "clone",
        region: "inherit",
        logicalId: "sdk/clone",
        source: { type: "database", databaseId: source.id },
      },
    });
    expect(cloned.error).toBeUndefined();
    expect(cloned.response.status).toBe(201);
    const clone = cloned.data!.data;
    expect(clone).toMatchObject({
      logicalId: "sdk/clone",
      source: { type: "database", databaseId: source.id },
      region: { id: "us-east-1" },
    });
    await eventually(async () =>
      expect(
        (await sdk.GET("/v1/databases/{databaseId}", { params: { path: { databaseId: clone.id } } })).data!.data.status,
      ).toBe("ready"),
    );
    expect(await sql(clone.connections[0]!.endpoints.direct!.connectionString!, "SELECT v FROM t")).toEqual([
      { v: "source data" },
    ]);
    const byLogicalId = await sdk.GET("/v1/databases", {
      params: { query: { projectId: project.id, logicalId: "sdk/clone" } },
    });
    expect(byLogicalId.data!.data.map((d) => d.id)).toEqual([clone.id]);

    // PATCH /v1/databases/{databaseId} with logicalId.
    const patched = await sdk.PATCH("/v1/databases/{databaseId}", {
      params: { path: { databaseId: clone.id } },
      body: { logicalId: "sdk/clone-2" },
    });
    expect(patched.data!.data.logicalId).toBe("sdk/clone-2");

    // POST /v1/connections, GET /v1/connections?databaseId=, GET /v1/connections/{id}.
    const minted = await sdk.POST("/v1/connections", { body: { databaseId: clone.id, name: "sdk" } });
    expect(minted.response.status).toBe(201);
    const conn = minted.data!.data;
    expect(conn.connectionString).toMatch(/^postgresql:\/\//);
    expect(await sql(conn.endpoints.direct!.connectionString, "SELECT v FROM t")).toEqual([{ v: "source data" }]);
    const listed = await sdk.GET("/v1/connections", { params: { query: { databaseId: clone.id } } });
    expect(listed.data!.data.map((c) => c.id)).toEqual([clone.connections[0]!.id, conn.id]);
    const got = await sdk.GET("/v1/connections/{id}", { params: { path: { id: conn.id } } });
    expect(got.data!.data).toMatchObject({ id: conn.id, kind: "postgres", database: { id: clone.id } });

    // POST /v1/connections/{id}/rotate: new credentials, the old ones stop.
    const rotated = await sdk.POST("/v1/connections/{id}/rotate", { params: { path: { id: conn.id } } });
    expect(rotated.response.status).toBe(200);
    expect(rotated.data!.data.id).toBe(conn.id);
    expect(await tryConnect(rotated.data!.data.endpoints.direct!.connectionString)).toBe(true);
    expect(await tryConnect(conn.endpoints.direct!.connectionString)).not.toBe(true);

    // DELETE /v1/connections/{id}.
    const deleted = await sdk.DELETE("/v1/connections/{id}", { params: { path: { id: conn.id } } });
    expect(deleted.response.status).toBe(204);
    expect((await sdk.GET("/v1/connections/{id}", { params: { path: { id: conn.id } } })).response.status).toBe(404);

    // GET /v1/regions/postgres.
    const regions = await sdk.GET("/v1/regions/postgres");
    expect(regions.data!.data.find((r) => r.id === "us-east-1")).toEqual({
      id: "us-east-1",
      type: "region",
      name: "US East (N. Virginia)",
      status: "available",
    });

    // GET /v1/databases/{databaseId}/usage.
    const usage = await sdk.GET("/v1/databases/{databaseId}/usage", { params: { path: { databaseId: source.id } } });
    expect(usage.response.status).toBe(200);
    expect(usage.data!.metrics.storage.unit).toBe("GiB");
    expect(usage.data!.metrics.storage.used).toBeGreaterThan(0);
  });

  it("drives the public API's branches: create, list, get, promote, databases on them, soft delete", async () => {
    const project = (
      await sdk.POST("/v1/projects", { body: { name: "sdk-branches", region: "us-east-1", createDatabase: false } })
    ).data!.data;
    const main = await sdk.POST("/v1/projects/{projectId}/branches", {
      params: { path: { projectId: project.id } },
      body: { gitName: "main" },
    });
    expect(main.response.status).toBe(201);
    expect(main.data!.data).toMatchObject({
      type: "branch",
      gitName: "main",
      isDefault: true,
      role: "production",
      project: { id: project.id },
    });
    const mainId = main.data!.data.id;

    // A database by git name creates its branch; listing by branchId and branchGitName finds it.
    const db = await sdk.POST("/v1/databases", {
      body: { projectId: project.id, name: "pr-db", branchGitName: "pr-9" },
    });
    expect(db.response.status).toBe(201);
    const prId = db.data!.data.branchId!;
    const pr = await sdk.GET("/v1/branches/{branchId}", { params: { path: { branchId: prId } } });
    expect(pr.data!.data).toMatchObject({ gitName: "pr-9", role: "preview", isDefault: false });
    const listed = await sdk.GET("/v1/projects/{projectId}/branches", {
      params: { path: { projectId: project.id }, query: { gitNameContains: "pr-" } },
    });
    expect(listed.data!.data.map((b) => b.id)).toEqual([prId]);
    expect(
      (await sdk.GET("/v1/databases", { params: { query: { branchId: prId } } })).data!.data.map((d) => d.id),
    ).toEqual([db.data!.data.id]);
    expect(
      (await sdk.GET("/v1/databases", { params: { query: { projectId: project.id, branchGitName: "pr-9" } } })).data!
        .data,
    ).toHaveLength(1);

    // Promote, move the database back to main, then the preview branch can go.
    const promoted = await sdk.PATCH("/v1/branches/{branchId}", {
      params: { path: { branchId: prId } },
      body: { isDefault: true },
    });
    expect(promoted.data!.data.isDefault).toBe(true);
    await sdk.PATCH("/v1/branches/{branchId}", { params: { path: { branchId: mainId } }, body: { isDefault: true } });
    const refused = await sdk.DELETE("/v1/branches/{branchId}", { params: { path: { branchId: prId } } });
    expect(refused.response.status).toBe(409);
    const moved = await sdk.PATCH("/v1/databases/{databaseId}", {
      params: { path: { databaseId: db.data!.data.id } },
      body: { branchId: mainId },
    });
    expect(moved.data!.data.branchId).toBe(mainId);
    expect(
      (await sdk.DELETE("/v1/branches/{branchId}", { params: { path: { branchId: prId } } })).response.status,
    ).toBe(204);
    expect((await sdk.GET("/v1/branches/{branchId}", { params: { path: { branchId: prId } } })).response.status).toBe(
      404,
    );
    const production = await sdk.DELETE("/v1/branches/{branchId}", { params: { path: { branchId: mainId } } });
    expect(production.response.status).toBe(422);
  });

  it("gets the error bodies the SDK types describe", async () => {
    const missing = await sdk.GET("/v1/databases/{databaseId}", {
      params: { path: { databaseId: "db_c000000000000000000000000" } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({
      error: { code: "not_found", message: expect.any(String), hint: expect.any(String) },
    });
  });
});
