import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// Everything a workspace can multiply is bounded. Branches are control rows only, and 3,000 went into one project
// without a refusal: live branches are now capped per project and per workspace. Soft-deleted rows were never purged
// (at the rate limit a workspace could add ~1.7 million a day to the shared control database): past
// `deletedRowRetentionDays` the maintenance pass removes them, with their finished jobs.

describe("branch quotas", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      service: { branchesPerProject: 3, branchesPerWorkspace: 5, rateLimit: { perSecond: 1000, burst: 1000 } },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  const project = async (api: ReturnType<typeof client>, name: string) =>
    (await api("POST", "/v1/projects", { name, createDatabase: false })).body.data.id as string;
  const branch = (api: ReturnType<typeof client>, projectId: string, gitName: string) =>
    api("POST", `/v1/projects/${projectId}/branches`, { gitName });

  it("refuses a project's branch past branchesPerProject, also one a database would create by its git name", async () => {
    const api = client(service, await service.createToken("branchy"));
    const a = await project(api, "a");
    for (const name of ["main", "b1", "b2"]) expect((await branch(api, a, name)).status).toBe(201);
    const refused = await branch(api, a, "b3");
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toBe(
      `cannot create a branch: project "${a}" has 3 live branches, its limit is 3`,
    );
    expect(refused.body.error.hint).toMatch(/branchesPerProject/);
    const byDatabase = await api("POST", "/v1/databases", { projectId: a, branchGitName: "b4" });
    expect(byDatabase.status).toBe(409);
    expect(byDatabase.body.error.message).toMatch(/has 3 live branches, its limit is 3/);
    // An existing git name still takes a database: no branch is created.
    expect((await api("POST", "/v1/databases", { projectId: a, branchGitName: "b1" })).status).toBe(201);

    // Per workspace: 3 in a, 2 in b, then the sixth is refused, whichever project it is in.
    const b = await project(api, "b");
    for (const name of ["main", "c1"]) expect((await branch(api, b, name)).status).toBe(201);
    const past = await branch(api, b, "c2");
    expect(past.status).toBe(409);
    expect(past.body.error.message).toBe("cannot create a branch: this workspace has 5 live branches, its limit is 5");
    expect(past.body.error.hint).toMatch(/branchesPerWorkspace/);

    // A deleted branch no longer counts.
    const b2 = ((await api("GET", `/v1/projects/${a}/branches?gitName=b2`)).body.data as Json[])[0].id as string;
    expect((await api("DELETE", `/v1/branches/${b2}`)).status).toBe(204);
    expect((await branch(api, b, "c2")).status).toBe(201);

    // Another workspace has its own.
    const other = client(service, await service.createToken("neighbour"));
    expect((await branch(other, await project(other, "n"), "main")).status).toBe(201);
  });

  it("holds under concurrent creates: exactly the limit goes through", async () => {
    const api = client(service, await service.createToken("racer"));
    const [p, q] = [await project(api, "p"), await project(api, "q")];
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => branch(api, i % 2 ? p : q, `r${i}`)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(5);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(7);
    const live = await sql<{ n: number }>(
      service.controlUrl,
      "SELECT count(*)::int AS n FROM branches WHERE project_id = ANY($1) AND deleted_at IS NULL",
      [[p, q]],
    );
    expect(live[0]!.n).toBe(5);
  });
});

describe("purge of soft-deleted rows", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ service: { deletedRowRetentionDays: 2, backupScheduleIntervalMs: 200 } });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("removes deleted projects, databases, branches, backups and connections past the retention, not before", async () => {
    const api = client(service, await service.createToken("deleter"));
    const make = async (name: string) => {
      const created = (await api("POST", "/v1/projects", { name })).body.data;
      const db = created.database.id as string;
      await eventually(async () => expect((await api("GET", `/v1/databases/${db}`)).body.data.status).toBe("ready"));
      const feature = (await api("POST", `/v1/projects/${created.id}/branches`, { gitName: "main" })).body.data.id;
      const preview = (await api("POST", `/v1/projects/${created.id}/branches`, { gitName: "gone" })).body.data.id;
      expect((await api("DELETE", `/v1/branches/${preview}`)).status).toBe(204);
      const backup = (await api("POST", `/v1/databases/${db}/backups`)).body.data.id as string;
      await eventually(async () => {
        const list = (await api("GET", `/v1/databases/${db}/backups`)).body.data as Json[];
        expect(list.every((b) => b.status === "completed")).toBe(true);
      });
      expect((await api("DELETE", `/v1/databases/${db}`)).status).toBe(204);
      expect((await api("DELETE", `/v1/projects/${created.id}`)).status).toBe(204);
      return { project: created.id as string, db, branches: [feature as string, preview as string], backup };
    };
    // Two expired access tokens of a workspace (every OAuth grant adds one): one three days ago, one an hour ago.
    const [{ workspace }] = (await sql<{ workspace: string }>(
      service.controlUrl,
      "SELECT id AS workspace FROM workspaces WHERE name = 'deleter'",
    )) as [{ workspace: string }];
    await sql(
      service.controlUrl,
      `INSERT INTO tokens (id, workspace_id, kind, hash, scopes, expires_at) VALUES
         ('tok_expiredlongago', $1, 'access', '\\x01', '{}', now() - interval '3 days'),
         ('tok_expiredrecently', $1, 'access', '\\x02', '{}', now() - interval '1 hour')`,
      [workspace],
    );
    const old = await make("old");
    const recent = await make("recent");
    const rows = async (x: typeof old) => {
      const [r] = await sql<Record<string, number>>(
        service.controlUrl,
        `SELECT (SELECT count(*)::int FROM projects WHERE id = $1) AS projects,
                (SELECT count(*)::int FROM databases WHERE id = $2) AS databases,
                (SELECT count(*)::int FROM connections WHERE database_id = $2) AS connections,
                (SELECT count(*)::int FROM branches WHERE id = ANY($3)) AS branches,
                (SELECT count(*)::int FROM backups WHERE database_id = $2) AS backups,
                (SELECT count(*)::int FROM jobs WHERE target_id = $2) AS jobs`,
        [x.project, x.db, x.branches],
      );
      return r!;
    };
    // Their drop jobs are done (the purge never takes a database a job still has to act on).
    await eventually(async () => {
      const [r] = await sql<{ n: number }>(
        service.controlUrl,
        "SELECT count(*)::int AS n FROM jobs WHERE target_id = ANY($1) AND state = 'pending'",
        [[old.db, recent.db]],
      );
      expect(r!.n).toBe(0);
    });
    const kept = await rows(recent);
    expect(kept).toMatchObject({ projects: 1, databases: 1, branches: 2 });
    expect(kept.connections).toBeGreaterThan(0);
    expect(kept.backups).toBeGreaterThan(0);
    // "old" was deleted three days ago, and its jobs finished then.
    for (const [table, column, where] of [
      ["projects", "deleted_at", "id = $1"],
      ["databases", "deleted_at", "id = $1"],
      ["branches", "deleted_at", "id = ANY($1)"],
      ["backups", "deleted_at", "database_id = $1"],
      ["jobs", "finished_at", "target_id = $1"],
    ] as const)
      await sql(service.controlUrl, `UPDATE ${table} SET ${column} = now() - interval '3 days' WHERE ${where}`, [
        table === "projects" ? old.project : table === "branches" ? old.branches : old.db,
      ]);
    await eventually(async () =>
      expect(await rows(old)).toEqual({
        projects: 0,
        databases: 0,
        connections: 0,
        branches: 0,
        backups: 0,
        jobs: 0,
      }),
    );
    expect(await rows(recent)).toEqual(kept);
    const tokens = await sql<{ id: string }>(
      service.controlUrl,
      "SELECT id FROM tokens WHERE id IN ('tok_expiredlongago', 'tok_expiredrecently')",
    );
    expect(tokens.map((t) => t.id)).toEqual(["tok_expiredrecently"]);
    expect((await api("GET", `/v1/databases/${old.db}`)).status).toBe(404);
    expect((await api("GET", `/v1/projects/${old.project}`)).status).toBe(404);
  });
});
