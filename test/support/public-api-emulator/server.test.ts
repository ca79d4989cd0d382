import { createManagementApiClient } from "@prisma/management-api-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../test-service.ts";
import { startPublicApiEmulator, type PublicApiEmulator } from "./server.ts";

// The emulator behaves as the public API documents (rules.ts), over real data: the public SDK drives it, and the
// codes, nulls, foreign objects and lost responses the operator must survive are really produced.

let service: TestService;
let emulator: PublicApiEmulator;
let sdk: ReturnType<typeof createManagementApiClient>;

beforeAll(async () => {
  service = await startTestService();
  emulator = await startPublicApiEmulator({ upstream: service.url });
  sdk = createManagementApiClient({ token: service.token, baseUrl: emulator.url });
});
afterAll(async () => {
  await emulator?.stop();
  await service?.stop();
});

const raw = (path: string, init: RequestInit = {}) =>
  fetch(`${emulator.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${service.token}`, "content-type": "application/json", ...init.headers },
  });

async function readyProject(name: string) {
  const created = await sdk.POST("/v1/projects", { body: { name, region: "us-east-1" } });
  const project = created.data!.data;
  for (;;) {
    const got = await sdk.GET("/v1/databases/{databaseId}", { params: { path: { databaseId: project.database!.id } } });
    if (got.data?.data.status === "ready") return project;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("public-API emulator", () => {
  it("speaks the public shapes through the public SDK: legal nulls, foreign objects, no replay announcement", async () => {
    const project = await readyProject("shapes");
    expect(project.database?.connectionString).toBeNull();
    const list = await sdk.GET("/v1/databases", {});
    const clone = list.data!.data.find((d) => d.source?.type === "database");
    expect(clone?.region).toBeNull();
    expect(list.data!.data.find((d) => d.id === project.database!.id)?.defaultConnectionId).toBeNull();
    const projects = await sdk.GET("/v1/projects", {});
    expect(projects.data!.data.some((p) => p.defaultRegion === null)).toBe(true);
    const backups = await sdk.GET("/v1/databases/{databaseId}/backups", {
      params: { path: { databaseId: project.database!.id } },
    });
    expect(backups.data!.data.some((b) => b.backupType === "incremental" && b.size === undefined)).toBe(true);
    expect(backups.data!.pagination.limit).toBeNull();
    const res = await raw("/v1/projects");
    expect(res.headers.get("x-idempotency-replay")).toBeNull();
  });

  it("ignores Idempotency-Key and logicalId where the public API does not take them", async () => {
    const project = await readyProject("keys");
    const post = () =>
      raw(`/v1/projects/${project.id}/databases`, {
        method: "POST",
        headers: { "idempotency-key": "same" },
        body: JSON.stringify({ name: "twice", logicalId: "dropped" }),
      });
    const [a, b] = [await post(), await post()];
    const [da, db] = [
      ((await a.json()) as { data: { id: string; logicalId: string | null } }).data,
      ((await b.json()) as { data: { id: string } }).data,
    ];
    expect(da.id).not.toBe(db.id);
    expect(da.logicalId).toBeNull();
    const viaBody = await sdk.POST("/v1/databases", {
      body: { projectId: project.id, name: "keyed", logicalId: "kept" },
    });
    expect(viaBody.data!.data.logicalId).toBe("kept");
  });

  it("uses the public status codes: 200 for a new connection, 403 for the default database, 400 for a project with databases, no hint", async () => {
    const project = await readyProject("codes");
    const other = await sdk.POST("/v1/databases", { body: { projectId: project.id, name: "other" } });
    const conn = await raw(`/v1/databases/${project.database!.id}/connections`, {
      method: "POST",
      body: JSON.stringify({ name: "app" }),
    });
    expect(conn.status).toBe(200);
    const defaultDelete = await raw(`/v1/databases/${project.database!.id}`, { method: "DELETE" });
    expect(defaultDelete.status).toBe(403);
    const projectDelete = await raw(`/v1/projects/${project.id}`, { method: "DELETE" });
    expect(projectDelete.status).toBe(400);
    expect(((await projectDelete.json()) as { error: object }).error).not.toHaveProperty("hint");
    expect((await raw(`/v1/databases/${other.data!.data.id}`, { method: "DELETE" })).status).toBe(204);
    // With only its default database left, the project goes, and its default database with it.
    expect((await raw(`/v1/projects/${project.id}`, { method: "DELETE" })).status).toBe(204);
    expect(
      (
        await fetch(`${service.url}/v1/databases/${project.database!.id}`, {
          headers: { authorization: `Bearer ${service.token}` },
        })
      ).status,
    ).toBe(404);
    expect((await raw(`/v1/databases/${project.database!.id}/backups`, { method: "POST" })).status).toBe(404);
    // Nor does it delete backups (our service's extension): 404 as any route the public API does not have.
    const backupPath = `/v1/databases/${project.database!.id}/backups/bkp_c000000000000000000000001`;
    expect((await raw(backupPath, { method: "DELETE" })).status).toBe(404);
  });

  it("passes branches and the branch fields through where the public API takes them, with its codes", async () => {
    const project = (
      await sdk.POST("/v1/projects", { body: { name: "branches", region: "us-east-1", createDatabase: false } })
    ).data!.data;
    // Unknown body fields are ignored on create (picked), and an Idempotency-Key does not replay.
    const create = () =>
      raw(`/v1/projects/${project.id}/branches`, {
        method: "POST",
        headers: { "idempotency-key": "b" },
        body: JSON.stringify({ gitName: "main", colour: "red" }),
      });
    const main = await create();
    expect(main.status).toBe(201);
    const mainId = ((await main.json()) as { data: { id: string } }).data.id;
    const again = await create();
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: object }).error).not.toHaveProperty("hint");
    // A connection read that fails is the service's error, without its hint, as every other answer.
    const missing = await raw("/v1/connections/missing");
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(((await missing.json()) as { error: object }).error).not.toHaveProperty("hint");

    const db = await sdk.POST("/v1/databases", { body: { projectId: project.id, name: "pr", branchGitName: "pr-1" } });
    expect(db.response.status).toBe(201);
    const prId = db.data!.data.branchId!;
    expect(
      (await sdk.GET("/v1/branches/{branchId}", { params: { path: { branchId: prId } } })).data!.data,
    ).toMatchObject({ gitName: "pr-1", role: "preview" });
    expect(
      (await sdk.GET("/v1/databases", { params: { query: { branchId: prId } } })).data!.data.map((d) => d.id),
    ).toEqual([db.data!.data.id]);
    // The console's clone (on no branch) is among the unassigned ones, not on a branch.
    expect(
      (await sdk.GET("/v1/databases", { params: { query: { branchId: "unassigned" } } })).data!.data.some(
        (d) => d.name === "console clone",
      ),
    ).toBe(true);
    // Not fields of POST /v1/projects/{id}/databases: dropped, so the database goes on the default branch.
    const viaProject = await raw(`/v1/projects/${project.id}/databases`, {
      method: "POST",
      body: JSON.stringify({ name: "via-project", branchId: prId }),
    });
    expect(((await viaProject.json()) as { data: { branchId: string } }).data.branchId).toBe(mainId);
    const moved = await sdk.PATCH("/v1/databases/{databaseId}", {
      params: { path: { databaseId: db.data!.data.id } },
      body: { branchId: mainId },
    });
    expect(moved.data!.data.branchId).toBe(mainId);
    expect(
      (await sdk.PATCH("/v1/branches/{branchId}", { params: { path: { branchId: prId } }, body: { isDefault: false } }))
        .response.status,
    ).toBe(200);
    expect(
      (await raw(`/v1/branches/${prId}`, { method: "PATCH", body: JSON.stringify({ gitName: "x" }) })).status,
    ).toBe(422);
    expect(
      (await sdk.DELETE("/v1/branches/{branchId}", { params: { path: { branchId: mainId } } })).response.status,
    ).toBe(422);
    expect(
      (await sdk.DELETE("/v1/branches/{branchId}", { params: { path: { branchId: prId } } })).response.status,
    ).toBe(204);
    expect(
      (
        await sdk.GET("/v1/projects/{projectId}/branches", { params: { path: { projectId: project.id } } })
      ).data!.data.map((b) => b.gitName),
    ).toEqual(["main"]);
  });

  it("loses a response after the server acted", async () => {
    const lossy = await startPublicApiEmulator({ upstream: service.url, faults: { loseResponse: 1, seed: 3 } });
    try {
      const before = await (
        await fetch(`${service.url}/v1/projects`, { headers: { authorization: `Bearer ${service.token}` } })
      ).json();
      const lost = await fetch(`${lossy.url}/v1/projects`, {
        method: "POST",
        headers: { authorization: `Bearer ${service.token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "lost" }),
      }).catch((e: unknown) => e);
      expect(lost).toBeInstanceOf(Error);
      const after = await (
        await fetch(`${service.url}/v1/projects`, { headers: { authorization: `Bearer ${service.token}` } })
      ).json();
      expect((after as { data: unknown[] }).data.length).toBe((before as { data: unknown[] }).data.length + 1);
      expect(lossy.stats.lost).toBe(1);
    } finally {
      await lossy.stop();
    }
  });
});
