import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Branch,
  CreatedDatabase,
  CreatedProject,
  Database,
  ErrorBody,
  dataOf,
  pageOf,
} from "../../src/contract/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, sql, type Json } from "./helpers.ts";

// Branches (PUBLIC-API.md "Branches"): the public API's model of preview environments, over HTTP with real
// PostgreSQL. Databases are created without waiting for them to be ready: branches are control data only.

let service: TestService;
let api: ReturnType<typeof client>;
let other: ReturnType<typeof client>;

beforeAll(async () => {
  service = await startTestService();
  api = client(service, service.token);
  other = client(service, await service.createToken("branches-other"));
});
afterAll(async () => {
  await service?.stop();
});

function expectError(res: { status: number; body: Json }, status: number, code: string, message?: string | RegExp) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  const { error } = ErrorBody.parse(res.body);
  expect(error.code).toBe(code);
  if (message !== undefined) expect(error.message).toMatch(message);
}
async function newProject(call = api, name = "branches"): Promise<Json> {
  return dataOf(CreatedProject).parse(
    (await call("POST", "/v1/projects", { name, region: "us-east-1", createDatabase: false })).body,
  ).data;
}
async function newBranch(projectId: string, gitName: string, extra: object = {}, call = api): Promise<Json> {
  const res = await call("POST", `/v1/projects/${projectId}/branches`, { gitName, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return dataOf(Branch).parse(res.body).data;
}
async function newDatabase(body: object, call = api): Promise<Json> {
  const res = await call("POST", "/v1/databases", body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}
const missingBranch = "br_c000000000000000000000000";
/** The message with the id replaced, to compare a foreign id's answer with a missing one's. */
const shape = (res: { body: Json }, id: string) => ({
  ...res.body.error,
  message: String(res.body.error.message).replace(id, "ID"),
});

describe("branches: workspace isolation", () => {
  it("another workspace's branch is a 404 indistinguishable from a missing one, everywhere a branch id is taken", async () => {
    const theirs = await newProject(other, "theirs");
    const branch = await newBranch(theirs.id, "main", {}, other);
    await newDatabase({ projectId: theirs.id, name: "their-db", branchId: branch.id }, other);
    const mine = await newProject();

    for (const [method, body] of [["GET"], ["PATCH", { isDefault: true }], ["DELETE"]] as const) {
      const foreign = await api(method, `/v1/branches/${branch.id}`, body);
      const missing = await api(method, `/v1/branches/${missingBranch}`, body);
      expectError(foreign, 404, "not_found");
      expect(shape(foreign, branch.id)).toEqual(shape(missing, missingBranch));
      expect(ErrorBody.parse(missing.body).error.hint).toBe(
        "check the id; branches of other workspaces are not visible to this token",
      );
    }
    // Their project is as absent as a missing one for listing and creating branches.
    expectError(await api("GET", `/v1/projects/${theirs.id}/branches`), 404, "not_found");
    expectError(await api("POST", `/v1/projects/${theirs.id}/branches`, { gitName: "steal" }), 404, "not_found");
    // A database of mine cannot be put on (or moved to) their branch.
    const onTheirs = await api("POST", "/v1/databases", { projectId: mine.id, branchId: branch.id });
    const onMissing = await api("POST", "/v1/databases", { projectId: mine.id, branchId: missingBranch });
    expectError(onTheirs, 404, "not_found");
    expect(shape(onTheirs, branch.id)).toEqual(shape(onMissing, missingBranch));
    const db = await newDatabase({ projectId: mine.id, name: "mine" });
    const moved = await api("PATCH", `/v1/databases/${db.id}`, { branchId: branch.id });
    expectError(moved, 404, "not_found");
    expect(shape(moved, branch.id)).toEqual(
      shape(await api("PATCH", `/v1/databases/${db.id}`, { branchId: missingBranch }), missingBranch),
    );
    // Filters by their branch find nothing of theirs (an unknown filter value is an empty page, docs/decisions.md#lists).
    expect((await api("GET", `/v1/databases?branchId=${branch.id}`)).body.data).toEqual([]);
    expect((await api("GET", `/v1/databases?branchGitName=main`)).body.data).toEqual([]);
    // And they still have it, untouched.
    const still = dataOf(Branch).parse((await other("GET", `/v1/branches/${branch.id}`)).body).data;
    expect(still).toMatchObject({ id: branch.id, isDefault: true });
    expect((await other("GET", `/v1/databases?branchId=${branch.id}`)).body.data).toHaveLength(1);
  });
});

describe("branches: the public API's rules", () => {
  it("makes the first branch production and default whatever was asked, later ones previews; isDefault swaps the flag only", async () => {
    const project = await newProject();
    const main = await newBranch(project.id, "main", { isDefault: false });
    expect(main).toMatchObject({
      type: "branch",
      gitName: "main",
      isDefault: true,
      role: "production",
      project: { id: project.id, name: project.name },
    });
    expect(main.id).toMatch(/^br_c[a-z0-9]{24}$/);
    expect(main.url).toBe(`${service.url}/v1/branches/${main.id}`);
    const preview = await newBranch(project.id, "feature/search");
    expect(preview).toMatchObject({ isDefault: false, role: "preview" });
    const release = await newBranch(project.id, "release/next", { isDefault: true });
    expect(release).toMatchObject({ isDefault: true, role: "preview" });
    const mainNow = dataOf(Branch).parse((await api("GET", `/v1/branches/${main.id}`)).body).data;
    expect(mainNow).toMatchObject({ isDefault: false, role: "production" });
    expect(Date.parse(mainNow.updatedAt)).toBeGreaterThan(Date.parse(main.updatedAt));

    // PATCH: promote (the role stays), and what it refuses with 422.
    const promoted = await api("PATCH", `/v1/branches/${preview.id}`, { isDefault: true });
    expect(promoted.status).toBe(200);
    expect(dataOf(Branch).parse(promoted.body).data).toMatchObject({ isDefault: true, role: "preview" });
    expect((await api("GET", `/v1/branches/${release.id}`)).body.data.isDefault).toBe(false);
    expectError(
      await api("PATCH", `/v1/branches/${preview.id}`, { isDefault: false }),
      422,
      "unprocessable",
      /default and cannot be demoted/,
    );
    expectError(
      await api("PATCH", `/v1/branches/${preview.id}`, { gitName: "renamed" }),
      422,
      "unprocessable",
      /gitName cannot be changed/,
    );
    expectError(
      await api("PATCH", `/v1/branches/${preview.id}`, { role: "production" }),
      422,
      "unprocessable",
      /role cannot be changed/,
    );
    expectError(
      await api("PATCH", `/v1/branches/${preview.id}`, { colour: "red" }),
      422,
      "unprocessable",
      /unknown field "colour"/,
    );
    expect((await api("PATCH", `/v1/branches/${release.id}`, { isDefault: false })).body.data.isDefault).toBe(false);
    expect((await api("PATCH", `/v1/branches/${release.id}`, {})).status).toBe(200);
    // A branch sent back as read changes nothing.
    const echoed = await api("PATCH", `/v1/branches/${preview.id}`, {
      gitName: "feature/search",
      role: "preview",
      isDefault: true,
    });
    expect(echoed.status).toBe(200);
    expectError(
      await api("PATCH", `/v1/branches/${preview.id}`, { isDefault: "yes" }),
      422,
      "unprocessable",
      /isDefault/,
    );

    // List: oldest first, exact and substring filters (not both), keyset pages.
    const all = await api("GET", `/v1/projects/${project.id}/branches`);
    expect(
      pageOf(Branch)
        .parse(all.body)
        .data.map((b) => b.gitName),
    ).toEqual(["main", "feature/search", "release/next"]);
    expect(
      (await api("GET", `/v1/projects/${project.id}/branches?gitName=main`)).body.data.map((b: Json) => b.id),
    ).toEqual([main.id]);
    expect((await api("GET", `/v1/projects/${project.id}/branches?gitNameContains=a`)).body.data).toHaveLength(3);
    expect(
      (
        await api("GET", `/v1/projects/${project.id}/branches?gitNameContains=${encodeURIComponent("/")}`)
      ).body.data.map((b: Json) => b.gitName),
    ).toEqual(["feature/search", "release/next"]);
    expect((await api("GET", `/v1/projects/${project.id}/branches?gitNameContains=MAIN`)).body.data).toEqual([]);
    expectError(
      await api("GET", `/v1/projects/${project.id}/branches?gitName=main&gitNameContains=ma`),
      422,
      "unprocessable",
      /cannot be combined/,
    );
    const first = await api("GET", `/v1/projects/${project.id}/branches?limit=2`);
    expect(first.body.pagination.hasMore).toBe(true);
    const rest = await api("GET", `/v1/projects/${project.id}/branches?cursor=${first.body.pagination.nextCursor}`);
    expect(rest.body).toMatchObject({ data: [{ id: release.id }], pagination: { hasMore: false, nextCursor: null } });
  });

  it("refuses a taken or invalid gitName (409, 422) and bad input (400), and replays an Idempotency-Key", async () => {
    const project = await newProject();
    const main = await newBranch(project.id, "main");
    expectError(
      await api("POST", `/v1/projects/${project.id}/branches`, { gitName: "main" }),
      409,
      "conflict",
      new RegExp(main.id),
    );
    for (const gitName of [
      "",
      "a b",
      "a..b",
      "-x",
      "x/",
      "/x",
      "a//b",
      "x.lock",
      "x/.hidden",
      "x.",
      "@",
      "a@{b",
      "a:b",
      "a~1",
      "a\u0007b",
      "x".repeat(256),
    ]) {
      expectError(
        await api("POST", `/v1/projects/${project.id}/branches`, { gitName }),
        422,
        "unprocessable",
        /^invalid request body: gitName: /,
      );
    }
    expectError(await api("POST", `/v1/projects/${project.id}/branches`, {}), 422, "unprocessable", /gitName/);
    expectError(
      await api("POST", `/v1/projects/${project.id}/branches`, { gitName: "ok", role: "production" }),
      400,
      "invalid_request",
      /unknown field "role"/,
    );
    expectError(
      await api("POST", `/v1/projects/${project.id}/branches`, { gitName: "ok", isDefault: "yes" }),
      400,
      "invalid_request",
      /isDefault/,
    );
    expectError(await api("GET", "/v1/branches/not-an-id!"), 400, "invalid_request");
    expectError(await api("GET", `/v1/projects/${project.id}/branches?limit=0`), 400, "invalid_request");

    const keyed = () =>
      api("POST", `/v1/projects/${project.id}/branches`, { gitName: "pr-7" }, { "idempotency-key": "branch-pr-7" });
    const [a, b] = [await keyed(), await keyed()];
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.body.data.id).toBe(a.body.data.id);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    // Valid names git allows.
    for (const gitName of ["feature/JIRA-12_fix", "renovate/pg-16.x", "dependabot/npm_and_yarn/zod-4.1.0", "ünïcode"])
      await newBranch(project.id, gitName);
  });

  it("soft-deletes a branch: not the default or production one (422), not while a database is on it (409); its gitName is free again", async () => {
    const project = await newProject();
    const main = await newBranch(project.id, "main");
    const pr = await newBranch(project.id, "pr-1");
    expectError(await api("DELETE", `/v1/branches/${main.id}`), 422, "unprocessable", /production/);
    const released = await newBranch(project.id, "release", { isDefault: true });
    expectError(await api("DELETE", `/v1/branches/${released.id}`), 422, "unprocessable", /default/);
    await api("PATCH", `/v1/branches/${main.id}`, { isDefault: true });

    const db = await newDatabase({ projectId: project.id, name: "pr-db", branchId: pr.id });
    expectError(await api("DELETE", `/v1/branches/${pr.id}`), 409, "conflict", /1 database\(s\) are still on it/);
    expect((await api("DELETE", `/v1/databases/${db.id}`)).status).toBe(204);
    const gone = await api("DELETE", `/v1/branches/${pr.id}`);
    expect(gone.status).toBe(204);
    expect(gone.body).toBeUndefined();
    expectError(await api("GET", `/v1/branches/${pr.id}`), 404, "not_found");
    expectError(await api("DELETE", `/v1/branches/${pr.id}`), 404, "not_found");
    expect((await api("GET", `/v1/projects/${project.id}/branches`)).body.data.map((b: Json) => b.gitName)).toEqual([
      "main",
      "release",
    ]);
    // Soft: the row stays (never reused), and the name can be taken again by a new branch.
    const rows = await sql<{ deleted: boolean }>(
      service.controlUrl,
      "SELECT deleted_at IS NOT NULL AS deleted FROM branches WHERE id = $1",
      [pr.id],
    );
    expect(rows).toEqual([{ deleted: true }]);
    const again = await newBranch(project.id, "pr-1");
    expect(again.id).not.toBe(pr.id);
    expectError(await api("POST", "/v1/databases", { projectId: project.id, branchId: pr.id }), 404, "not_found");
  });
});

describe("branches: databases on them", () => {
  it("puts a database on a branch by id, by git name (created when missing) or on the default branch; none before the project has one", async () => {
    const project = await newProject();
    const before = await newDatabase({ projectId: project.id, name: "before-branches" });
    expect(before.branchId).toBeNull();
    expect(
      (await api("GET", `/v1/databases?projectId=${project.id}&branchId=unassigned`)).body.data.map((d: Json) => d.id),
    ).toEqual([before.id]);
    // The project's first branch takes the databases it already has.
    const main = await newBranch(project.id, "main");
    expect((await api("GET", `/v1/databases/${before.id}`)).body.data.branchId).toBe(main.id);
    const onDefault = await newDatabase({ projectId: project.id, name: "default-branch" });
    expect(onDefault.branchId).toBe(main.id);
    const viaProject = dataOf(CreatedDatabase).parse(
      (await api("POST", `/v1/projects/${project.id}/databases`, { name: "via-project" })).body,
    ).data;
    expect(viaProject.branchId).toBe(main.id);
    // branchGitName creates the branch (a preview: the project has its production branch), then reuses it.
    const pr = await newDatabase({ projectId: project.id, name: "pr-42", branchGitName: "pr-42" });
    const branches = pageOf(Branch).parse(
      (await api("GET", `/v1/projects/${project.id}/branches?gitName=pr-42`)).body,
    ).data;
    expect(branches).toHaveLength(1);
    expect(branches[0]).toMatchObject({ role: "preview", isDefault: false });
    expect(pr.branchId).toBe(branches[0]!.id);
    const pr2 = await newDatabase({ projectId: project.id, name: "pr-42-b", branchGitName: "pr-42" });
    expect(pr2.branchId).toBe(pr.branchId);
    const byId = await newDatabase({ projectId: project.id, name: "by-id", branchId: main.id });
    expect(byId.branchId).toBe(main.id);
    // Every read shows it.
    expect(dataOf(Database).parse((await api("GET", `/v1/databases/${pr.id}`)).body).data.branchId).toBe(pr.branchId);

    // Filters: by id, by git name, "unassigned"; not both.
    const ids = async (query: string) =>
      pageOf(Database)
        .parse((await api("GET", `/v1/databases?${query}`)).body)
        .data.map((d) => d.name);
    expect(await ids(`branchId=${pr.branchId}`)).toEqual(["pr-42", "pr-42-b"]);
    expect(await ids(`projectId=${project.id}&branchGitName=main`)).toEqual([
      "before-branches",
      "default-branch",
      "via-project",
      "by-id",
    ]);
    expect(await ids(`projectId=${project.id}&branchId=unassigned`)).toEqual([]);
    expect(await ids(`branchId=${missingBranch}`)).toEqual([]);
    expect((await api("GET", `/v1/projects/${project.id}/databases?branchId=${main.id}`)).body.data).toHaveLength(4);
    expectError(
      await api("GET", `/v1/databases?branchId=${main.id}&branchGitName=main`),
      400,
      "invalid_request",
      /cannot be combined/,
    );
    expectError(await api("GET", "/v1/databases?branchGitName=a..b"), 400, "invalid_request", /branchGitName/);
  });

  it("refuses null, both branch fields, logicalId with branchGitName, and a branch of another project", async () => {
    const project = await newProject();
    const main = await newBranch(project.id, "main");
    const otherProject = await newProject();
    const theirs = await newBranch(otherProject.id, "main");
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchId: null }),
      400,
      "invalid_request",
      /branchId/,
    );
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchGitName: null }),
      400,
      "invalid_request",
      /branchGitName/,
    );
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchId: main.id, branchGitName: "main" }),
      400,
      "invalid_request",
      /branchGitName: cannot be combined with branchId/,
    );
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchGitName: "main", logicalId: "app/db" }),
      400,
      "invalid_request",
      /logicalId: cannot be combined with branchGitName: pass branchId instead/,
    );
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchGitName: "bad name" }),
      400,
      "invalid_request",
      /branchGitName: is not a valid git branch name/,
    );
    expectError(
      await api("POST", `/v1/projects/${project.id}/databases`, { branchId: main.id }),
      400,
      "invalid_request",
      /unknown field "branchId"/,
    );
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchId: theirs.id }),
      422,
      "unprocessable",
      new RegExp(`belongs to project "${otherProject.id}"`),
    );
    const db = await newDatabase({ projectId: project.id, name: "x", branchId: main.id, logicalId: "app/x" });
    expect(db.logicalId).toBe("app/x");
    expectError(await api("PATCH", `/v1/databases/${db.id}`, { branchId: null }), 400, "invalid_request", /branchId/);
    expectError(
      await api("PATCH", `/v1/databases/${db.id}`, { branchId: main.id, logicalId: "app/y" }),
      400,
      "invalid_request",
      /move the database first, then set its logicalId/,
    );
    expectError(
      await api("PATCH", `/v1/databases/${db.id}`, { branchGitName: "pr-1", logicalId: "app/y" }),
      400,
      "invalid_request",
      /move the database first/,
    );
    expectError(await api("PATCH", `/v1/databases/${db.id}`, { branchId: theirs.id }), 422, "unprocessable");
    // Nothing of it happened.
    expect((await api("GET", `/v1/projects/${project.id}/branches`)).body.data).toHaveLength(1);
    expect((await api("GET", `/v1/databases?projectId=${project.id}`)).body.data).toHaveLength(1);
  });

  it("keeps logicalId unique within a branch: the same one on two branches, 409 on one, and on a move onto a branch that has it", async () => {
    const project = await newProject();
    const main = await newBranch(project.id, "main");
    const pr = await newBranch(project.id, "pr-1");
    const onMain = await newDatabase({
      projectId: project.id,
      name: "orders",
      branchId: main.id,
      logicalId: "app/orders",
    });
    const onPr = await newDatabase({
      projectId: project.id,
      name: "orders-pr",
      branchId: pr.id,
      logicalId: "app/orders",
    });
    expectError(
      await api("POST", "/v1/databases", { projectId: project.id, branchId: pr.id, logicalId: "app/orders" }),
      409,
      "conflict",
      new RegExp(onPr.id),
    );
    expect((await api("GET", `/v1/databases?projectId=${project.id}&logicalId=app%2Forders`)).body.data).toHaveLength(
      2,
    );
    expect(
      (await api("GET", `/v1/databases?branchId=${pr.id}&logicalId=app%2Forders`)).body.data.map((d: Json) => d.id),
    ).toEqual([onPr.id]);
    // A move onto main, where app/orders is taken: 409 naming the holder, and the database stays where it was.
    const move = await api("PATCH", `/v1/databases/${onPr.id}`, { branchId: main.id });
    expectError(move, 409, "conflict", new RegExp(onMain.id));
    expect((await api("GET", `/v1/databases/${onPr.id}`)).body.data.branchId).toBe(pr.id);
    // Set logicalId on the branch, then move; a move by git name creates the branch.
    expect((await api("PATCH", `/v1/databases/${onPr.id}`, { logicalId: "app/orders-pr" })).body.data.logicalId).toBe(
      "app/orders-pr",
    );
    const moved = await api("PATCH", `/v1/databases/${onPr.id}`, { branchId: main.id });
    expect(moved.status).toBe(200);
    expect(dataOf(Database).parse(moved.body).data).toMatchObject({ branchId: main.id, logicalId: "app/orders-pr" });
    // On main now: main's logicalIds are its scope.
    expectError(
      await api("PATCH", `/v1/databases/${onPr.id}`, { logicalId: "app/orders" }),
      409,
      "conflict",
      new RegExp(onMain.id),
    );
    const byName = await api("PATCH", `/v1/databases/${onPr.id}`, { branchGitName: "pr-2" });
    expect(byName.status).toBe(200);
    const pr2 = (await api("GET", `/v1/projects/${project.id}/branches?gitName=pr-2`)).body.data[0];
    expect(byName.body.data.branchId).toBe(pr2.id);
    // pr-1 is empty now, so it can go.
    expect((await api("DELETE", `/v1/branches/${pr.id}`)).status).toBe(204);
  });

  it("decides concurrent first branches and concurrent creates by one new git name exactly once", async () => {
    const project = await newProject();
    // Databases created while the first branch is made: every one ends up on it, none is left on no branch.
    const during = [1, 2, 3, 4].map((n) =>
      api("POST", "/v1/databases", { projectId: project.id, name: `during-${n}` }),
    );
    const firsts = await Promise.all(
      ["a", "b", "c"].map((gitName) => api("POST", `/v1/projects/${project.id}/branches`, { gitName })),
    );
    expect(firsts.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(firsts.map((r) => r.body.data.role).sort()).toEqual(["preview", "preview", "production"]);
    expect(firsts.filter((r) => r.body.data.isDefault)).toHaveLength(1);
    const production = firsts.find((r) => r.body.data.role === "production")!.body.data.id;
    expect((await Promise.all(during)).map((r) => r.status)).toEqual([201, 201, 201, 201]);
    const placed = pageOf(Database).parse((await api("GET", `/v1/databases?projectId=${project.id}`)).body).data;
    expect(placed.map((d) => d.branchId)).toEqual([production, production, production, production]);
    const dbs = await Promise.all(
      [1, 2, 3].map((n) =>
        api("POST", "/v1/databases", { projectId: project.id, name: `racer-${n}`, branchGitName: "pr-race" }),
      ),
    );
    expect(dbs.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(new Set(dbs.map((r) => r.body.data.branchId)).size).toBe(1);
    // A delete racing a create onto the branch either wins before it (the create is 404) or sees it (409): never both through.
    const target = await newBranch(project.id, "pr-delete-race");
    const [created, deleted] = await Promise.all([
      api("POST", "/v1/databases", { projectId: project.id, name: "late", branchId: target.id }),
      api("DELETE", `/v1/branches/${target.id}`),
    ]);
    expect([
      [201, 409],
      [404, 204],
    ]).toContainEqual([created.status, deleted.status]);
  });
});
