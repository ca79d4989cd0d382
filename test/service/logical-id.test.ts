import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type MdsClient } from "../../src/client/index.ts";
import { CreatedDatabase, CreatedProject, Database, Project, dataOf, pageOf } from "../../src/contract/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client } from "./helpers.ts";

// `logicalId` on every project and database response (as the public API family returns it): the operator's
// list-based mirror indexes by it, so a lookup before create needs no call of its own.

let service: TestService;
let raw: ReturnType<typeof client>;
let api: MdsClient;

beforeAll(async () => {
  service = await startTestService();
  raw = client(service, service.token);
  api = createClient({ baseUrl: service.url, token: service.token });
});
afterAll(async () => {
  await service?.stop();
});

describe("service: logicalId in responses", () => {
  it("returns the logicalId on a project, its nested database and every later read; null when none was given", async () => {
    const created = await raw("POST", "/v1/projects", {
      name: "lid-p",
      region: "us-east-1",
      logicalId: "k8s:test:ns/p",
    });
    expect(created.status).toBe(201);
    const project = dataOf(CreatedProject).parse(created.body).data;
    expect(project.logicalId).toBe("k8s:test:ns/p");
    // The default database was created without a logicalId of its own.
    expect(project.database?.logicalId).toBeNull();

    const got = await raw("GET", `/v1/projects/${project.id}`);
    expect(dataOf(Project).parse(got.body).data.logicalId).toBe("k8s:test:ns/p");
    const listed = await raw("GET", `/v1/projects?logicalId=${encodeURIComponent("k8s:test:ns/p")}`);
    expect(
      pageOf(Project)
        .parse(listed.body)
        .data.map((p) => p.logicalId),
    ).toEqual(["k8s:test:ns/p"]);

    const plain = await raw("POST", "/v1/projects", { name: "lid-plain", region: "us-east-1", createDatabase: false });
    expect(dataOf(CreatedProject).parse(plain.body).data.logicalId).toBeNull();
  });

  it("returns the logicalId on a created database, GET, list, PATCH and the Idempotency-Key replay", async () => {
    const project = dataOf(CreatedProject).parse(
      (await raw("POST", "/v1/projects", { name: "lid-q", region: "us-east-1", createDatabase: false })).body,
    ).data;
    const body = { name: "orders", logicalId: "k8s:test:ns/orders" };
    const headers = { "idempotency-key": "lid-orders-1" };
    const created = await raw("POST", `/v1/projects/${project.id}/databases`, body, headers);
    expect(created.status).toBe(201);
    const db = dataOf(CreatedDatabase).parse(created.body).data;
    expect(db.logicalId).toBe("k8s:test:ns/orders");

    const replay = await raw("POST", `/v1/projects/${project.id}/databases`, body, headers);
    expect(dataOf(CreatedDatabase).parse(replay.body).data).toMatchObject({
      id: db.id,
      logicalId: "k8s:test:ns/orders",
    });
    expect(dataOf(Database).parse((await raw("GET", `/v1/databases/${db.id}`)).body).data.logicalId).toBe(
      "k8s:test:ns/orders",
    );
    const all = pageOf(Database).parse((await raw("GET", `/v1/databases?projectId=${project.id}`)).body).data;
    expect(all.map((d) => [d.id, d.logicalId])).toEqual([[db.id, "k8s:test:ns/orders"]]);
    const patched = await raw("PATCH", `/v1/databases/${db.id}`, { name: "orders-2" });
    expect(dataOf(Database).parse(patched.body).data.logicalId).toBe("k8s:test:ns/orders");

    const anonymous = await raw("POST", `/v1/projects/${project.id}/databases`, { name: "no-lid" });
    expect(dataOf(CreatedDatabase).parse(anonymous.body).data.logicalId).toBeNull();
  });
});

describe("client: logicalId in parsed responses", () => {
  it("keeps logicalId on projects and databases, from creates, reads and lists", async () => {
    const project = await api.createProject({ name: "lid-c", region: "us-east-1", logicalId: "k8s:test:ns/c" });
    expect(project.logicalId).toBe("k8s:test:ns/c");
    expect((await api.getProject(project.id)).logicalId).toBe("k8s:test:ns/c");
    expect((await api.listProjects({ logicalId: "k8s:test:ns/c" })).data.map((p) => p.logicalId)).toEqual([
      "k8s:test:ns/c",
    ]);

    const db = await api.createProjectDatabase(
      project.id,
      { name: "c-db", logicalId: "k8s:test:ns/c-db" },
      { idempotencyKey: "lid-c-db" },
    );
    expect(db.logicalId).toBe("k8s:test:ns/c-db");
    expect((await api.getDatabase(db.id)).logicalId).toBe("k8s:test:ns/c-db");
    const page = await api.listDatabases({ projectId: project.id, limit: 100 });
    expect(Object.fromEntries(page.data.map((d) => [d.id, d.logicalId]))).toEqual({
      [db.id]: "k8s:test:ns/c-db",
      [project.database!.id]: null,
    });
  });

  it("parses a response without logicalId (another compatible service) as undefined", async () => {
    const { logicalId: _dropped, ...project } = (await raw("GET", "/v1/projects?limit=1")).body.data[0] as Record<
      string,
      unknown
    >;
    const parsed = Project.safeParse(project);
    expect(parsed.success, JSON.stringify(parsed.error)).toBe(true);
    expect(parsed.data?.logicalId).toBeUndefined();
  });
});
