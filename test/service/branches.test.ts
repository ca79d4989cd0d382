import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Branch, CreatedDatabase, CreatedProject, Database, ErrorBody, dataOf, pageOf } from "../../src/contract/index.ts";
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
  return dataOf(CreatedProject).parse((await call("POST", "/v1/projects", { name, region: "us-east-1", createDatabase: false })).body).data;
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
const shape = (res: { body: Json }, id: string) => ({ ...res.body.error, message: String(res.body.error.message).replace(id, "ID") });

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
    expect(shape(moved, branch.id)).toEqual(shape(await api("PATCH", `/v1/databases/${db.id}`, { branchId: missingBranch }), missingBranch));
    // Filters by their branch find nothing of theirs (an unknown filter value is an empty page, CONTRACT §7).
    expect((await api("GET", `/v1/databases?branchId=${branch.id}`)).body.data).toEqual([]);
    expect((await api("GET", `/v1/databases?branchGitName=main`)).body.data).toEqual([]);
    // And they still have it, untouched.
    const still = dataOf(Branch).parse((await other("GET", `/v1/branches/${branch.id}`)).body).data;
    expect(still).toMatchObject({ id: branch.id, isDefault: true });
    expect((await other("GET", `/v1/databases?branchId=${branch.id}`)).body.data).toHaveLength(1);
  });
});
