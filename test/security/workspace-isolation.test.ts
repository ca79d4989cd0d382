import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService } from "../support/test-service.ts";

// The two-workspace property: whatever sequence of requests one workspace sends at the
// other's projects, databases, connections and backups, every one is 404 (existence is never
// revealed), lists show nothing of the other, and the other workspace's objects stay exactly as
// they were, credentials included. Requests go over plain HTTP so each status is seen as sent.

type Service = Awaited<ReturnType<typeof startTestService>>;

interface Workspace {
  label: "A" | "B";
  token: string;
  projectId: string;
  projectLogicalId: string;
  databaseId: string;
  databaseLogicalId: string;
  connectionId: string;
  backupId: string;
  connectionString: string;
  /** A preview branch of the project (its production branch `main` exists too). */
  branchId: string;
  branchGitName: string;
}

interface Reply {
  status: number;
  body: unknown;
}

let service: Service;
const ws: Record<"A" | "B", Workspace> = {} as Record<"A" | "B", Workspace>;

async function call(
  token: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await fetch(service.url + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) };
}

function dataOf<T>(reply: Reply, what: string): T {
  if (reply.status >= 300) throw new Error(`${what}: HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
  return (reply.body as { data: T }).data;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function setUpWorkspace(label: "A" | "B", token: string): Promise<Workspace> {
  const projectLogicalId = `isolation:${label}:project`;
  const project = dataOf<{ id: string; database: { id: string } }>(
    await call(token, "POST", "/v1/projects", { name: `iso-${label}`, logicalId: projectLogicalId }),
    `create project ${label}`,
  );
  const databaseLogicalId = `isolation:${label}:db`;
  const db = dataOf<{ id: string; connections: Array<{ id: string }>; connectionString?: string }>(
    await call(token, "POST", `/v1/projects/${project.id}/databases`, {
      name: `iso-${label}-db`,
      logicalId: databaseLogicalId,
    }),
    `create database ${label}`,
  );
  await until(`database ${label} ready`, async () => {
    const d = dataOf<{ status: string }>(await call(token, "GET", `/v1/databases/${db.id}`), "get database");
    return d.status === "ready" ? true : undefined;
  });
  await until(`default database ${label} ready`, async () => {
    const d = dataOf<{ status: string }>(
      await call(token, "GET", `/v1/databases/${project.database.id}`),
      "get database",
    );
    return d.status === "ready" ? true : undefined;
  });
  const connection = dataOf<{ id: string; endpoints: { direct: { connectionString: string } } }>(
    await call(token, "POST", `/v1/databases/${db.id}/connections`, { name: `iso-${label}-con` }),
    `create connection ${label}`,
  );
  const backup = dataOf<{ id: string }>(
    await call(token, "POST", `/v1/databases/${db.id}/backups`, {}),
    `create backup ${label}`,
  );
  await until(`backup ${label} completed`, async () => {
    const list = dataOf<Array<{ id: string; status: string }>>(
      await call(token, "GET", `/v1/databases/${db.id}/backups`),
      "list backups",
    );
    const status = list.find((b) => b.id === backup.id)?.status;
    if (status === "failed") throw new Error(`backup ${label} failed`);
    return status === "completed" ? true : undefined;
  });
  // Branches after the databases, which so stay on no branch: the branch calls below are what is attacked.
  dataOf(
    await call(token, "POST", `/v1/projects/${project.id}/branches`, { gitName: "main" }),
    `create branch main ${label}`,
  );
  const branchGitName = `iso-${label}-pr`;
  const branch = dataOf<{ id: string }>(
    await call(token, "POST", `/v1/projects/${project.id}/branches`, { gitName: branchGitName }),
    `create branch ${label}`,
  );
  return {
    label,
    token,
    branchId: branch.id,
    branchGitName,
    projectId: project.id,
    projectLogicalId,
    databaseId: db.id,
    databaseLogicalId,
    connectionId: connection.id,
    backupId: backup.id,
    connectionString: connection.endpoints.direct.connectionString,
  };
}

/** Everything a workspace can read of its own objects; it must not change under the other's requests. */
async function snapshot(w: Workspace): Promise<unknown> {
  const get = async (path: string) => {
    const reply = await call(w.token, "GET", path);
    return { path, status: reply.status, body: reply.body };
  };
  return [
    await get(`/v1/projects/${w.projectId}`),
    await get(`/v1/projects`),
    await get(`/v1/databases`),
    await get(`/v1/databases/${w.databaseId}`),
    await get(`/v1/projects/${w.projectId}/databases`),
    await get(`/v1/databases/${w.databaseId}/connections`),
    await get(`/v1/databases/${w.databaseId}/backups`),
    await get(`/v1/branches/${w.branchId}`),
    await get(`/v1/projects/${w.projectId}/branches`),
  ];
}

// Each operation is a request of `actor` at the `victim`'s objects (or carrying them in the body).
type Expectation = "404" | "empty-list" | "no-foreign-items";
interface Operation {
  name: string;
  method: string;
  path: (actor: Workspace, victim: Workspace, id: (raw: string) => string) => string;
  body?: (actor: Workspace, victim: Workspace, id: (raw: string) => string) => unknown;
  expect: Expectation;
}

const operations: Operation[] = [
  { name: "get project", method: "GET", path: (_a, v, id) => `/v1/projects/${id(v.projectId)}`, expect: "404" },
  { name: "delete project", method: "DELETE", path: (_a, v, id) => `/v1/projects/${id(v.projectId)}`, expect: "404" },
  {
    name: "list project databases",
    method: "GET",
    path: (_a, v, id) => `/v1/projects/${id(v.projectId)}/databases`,
    expect: "404",
  },
  {
    name: "create database under project",
    method: "POST",
    path: (_a, v, id) => `/v1/projects/${id(v.projectId)}/databases`,
    body: () => ({ name: "intruder" }),
    expect: "404",
  },
  {
    name: "create database with projectId",
    method: "POST",
    path: () => `/v1/databases`,
    body: (_a, v, id) => ({ projectId: id(v.projectId), name: "intruder" }),
    expect: "404",
  },
  { name: "get database", method: "GET", path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}`, expect: "404" },
  {
    name: "rename database",
    method: "PATCH",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}`,
    body: () => ({ name: "renamed-by-intruder" }),
    expect: "404",
  },
  {
    name: "make default",
    method: "PATCH",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}`,
    body: () => ({ isDefault: true }),
    expect: "404",
  },
  {
    name: "delete database",
    method: "DELETE",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}`,
    expect: "404",
  },
  {
    name: "restore victim from its own backup",
    method: "POST",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}/restore`,
    body: (_a, v) => ({ source: { type: "backup", databaseId: v.databaseId, backupId: v.backupId } }),
    expect: "404",
  },
  {
    name: "restore own database from victim's backup",
    method: "POST",
    path: (a) => `/v1/databases/${a.databaseId}/restore`,
    body: (_a, v, id) => ({ source: { type: "backup", databaseId: id(v.databaseId), backupId: id(v.backupId) } }),
    expect: "404",
  },
  {
    name: "create own database from victim's backup",
    method: "POST",
    path: (a) => `/v1/projects/${a.projectId}/databases`,
    body: (_a, v, id) => ({
      name: "copy",
      source: { type: "backup", databaseId: id(v.databaseId), backupId: id(v.backupId) },
    }),
    expect: "404",
  },
  {
    name: "list connections",
    method: "GET",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}/connections`,
    expect: "404",
  },
  {
    name: "mint connection",
    method: "POST",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}/connections`,
    body: () => ({ name: "intruder" }),
    expect: "404",
  },
  {
    // Also what a rotation asks before revoking a login: how many sessions use it (openSessions).
    name: "get connection",
    method: "GET",
    path: (_a, v, id) => `/v1/connections/${id(v.connectionId)}`,
    expect: "404",
  },
  {
    name: "revoke connection",
    method: "DELETE",
    path: (_a, v, id) => `/v1/connections/${id(v.connectionId)}`,
    expect: "404",
  },
  {
    name: "list backups",
    method: "GET",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}/backups`,
    expect: "404",
  },
  {
    name: "take backup",
    method: "POST",
    path: (_a, v, id) => `/v1/databases/${id(v.databaseId)}/backups`,
    body: () => ({}),
    expect: "404",
  },
  {
    name: "list databases by projectId",
    method: "GET",
    path: (_a, v, id) => `/v1/databases?projectId=${id(v.projectId)}`,
    expect: "empty-list",
  },
  {
    name: "list databases by logicalId",
    method: "GET",
    path: (_a, v) => `/v1/databases?logicalId=${encodeURIComponent(v.databaseLogicalId)}`,
    expect: "no-foreign-items",
  },
  {
    name: "list projects by logicalId",
    method: "GET",
    path: (_a, v) => `/v1/projects?logicalId=${encodeURIComponent(v.projectLogicalId)}`,
    expect: "no-foreign-items",
  },
  { name: "list all databases", method: "GET", path: () => `/v1/databases`, expect: "no-foreign-items" },
  { name: "list all projects", method: "GET", path: () => `/v1/projects`, expect: "no-foreign-items" },
  { name: "get branch", method: "GET", path: (_a, v, id) => `/v1/branches/${id(v.branchId)}`, expect: "404" },
  {
    name: "promote branch",
    method: "PATCH",
    path: (_a, v, id) => `/v1/branches/${id(v.branchId)}`,
    body: () => ({ isDefault: true }),
    expect: "404",
  },
  { name: "delete branch", method: "DELETE", path: (_a, v, id) => `/v1/branches/${id(v.branchId)}`, expect: "404" },
  {
    name: "list project branches",
    method: "GET",
    path: (_a, v, id) => `/v1/projects/${id(v.projectId)}/branches`,
    expect: "404",
  },
  {
    name: "create branch in project",
    method: "POST",
    path: (_a, v, id) => `/v1/projects/${id(v.projectId)}/branches`,
    body: () => ({ gitName: "intruder" }),
    expect: "404",
  },
  {
    name: "create own database on victim's branch",
    method: "POST",
    path: () => `/v1/databases`,
    body: (a, v, id) => ({ projectId: a.projectId, name: "intruder", branchId: id(v.branchId) }),
    expect: "404",
  },
  {
    name: "move own database to victim's branch",
    method: "PATCH",
    path: (a) => `/v1/databases/${a.databaseId}`,
    body: (_a, v, id) => ({ branchId: id(v.branchId) }),
    expect: "404",
  },
  {
    name: "list databases by branchId",
    method: "GET",
    path: (_a, v, id) => `/v1/databases?branchId=${id(v.branchId)}`,
    expect: "empty-list",
  },
  {
    name: "list databases by branchGitName",
    method: "GET",
    path: (_a, v) => `/v1/databases?branchGitName=${encodeURIComponent(v.branchGitName)}`,
    expect: "empty-list",
  },
];

// Ids are accepted with or without their prefix (the seed's patterns); both forms must stay foreign.
const stripPrefix = (raw: string) => raw.replace(/^[a-z]+_/, "");

const Step = fc.record({
  operation: fc.constantFrom(...operations),
  attacker: fc.constantFrom<"A" | "B">("A", "B"),
  unprefixed: fc.boolean(),
});

/** A victim whose ids have the same shapes but never existed: the control group for "existence is never revealed". */
function phantomOf(victim: Workspace): Workspace {
  const fresh = (id: string) =>
    id.replace(
      /c[a-z0-9]{24}$/,
      () =>
        "c" +
        Array.from({ length: 24 }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[Math.floor(Math.random() * 36)]).join(
          "",
        ),
    );
  return {
    ...victim,
    projectId: fresh(victim.projectId),
    databaseId: fresh(victim.databaseId),
    connectionId: fresh(victim.connectionId),
    backupId: fresh(victim.backupId),
    branchId: fresh(victim.branchId),
    branchGitName: `${victim.branchGitName}-phantom`,
    projectLogicalId: `${victim.projectLogicalId}:phantom`,
    databaseLogicalId: `${victim.databaseLogicalId}:phantom`,
  };
}

function idsOf(w: Workspace): string[] {
  return [w.projectId, w.databaseId, w.connectionId, w.backupId, w.branchId];
}

/** The reply with every id of `w` (prefixed or not) replaced by a placeholder, for comparison. */
function normalised(reply: Reply, w: Workspace): string {
  let text = JSON.stringify(reply.body ?? null);
  for (const id of idsOf(w)) text = text.split(id).join("<id>").split(stripPrefix(id)).join("<id>");
  return text;
}

function checkReply(
  step: { operation: Operation; attacker: "A" | "B" },
  victim: Workspace,
  reply: Reply,
  control: Reply,
  phantom: Workspace,
  sent: string,
): void {
  const label = `${step.attacker} → ${victim.label}: ${step.operation.name}`;
  const text = JSON.stringify(reply.body ?? null);
  switch (step.operation.expect) {
    case "404":
      expect(reply.status, `${label}: ${text}`).toBe(404);
      expect((reply.body as { error?: { code?: string } }).error?.code, label).toBe("not_found");
      break;
    case "empty-list":
      expect(reply.status, label).toBe(200);
      expect((reply.body as { data: unknown[] }).data, label).toEqual([]);
      break;
    case "no-foreign-items":
      expect(reply.status, label).toBe(200);
      break;
  }
  // Existence is never revealed: the answer about a real foreign object reads exactly like the answer about
  // an id that never existed.
  expect(reply.status, `${label}: differs from a never-existing id`).toBe(control.status);
  expect(normalised(reply, victim), `${label}: differs from a never-existing id`).toBe(normalised(control, phantom));
  // No reply names a foreign object the request did not name itself.
  for (const id of idsOf(victim)) {
    if (sent.includes(id) || sent.includes(stripPrefix(id))) continue;
    expect(text.includes(id) || text.includes(stripPrefix(id)), `${label} revealed ${id}`).toBe(false);
  }
}

describe("workspace isolation", () => {
  let before: Record<"A" | "B", unknown>;

  beforeAll(async () => {
    service = await startTestService();
    const tokenB = await service.createToken("isolation-b");
    ws.A = await setUpWorkspace("A", service.token);
    ws.B = await setUpWorkspace("B", tokenB);
    before = { A: await snapshot(ws.A), B: await snapshot(ws.B) };
  });

  afterAll(async () => {
    await service?.stop();
  });

  it("every request at the other workspace's objects is 404, reveals nothing and changes nothing", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(Step, { minLength: 1, maxLength: 8 }), async (steps) => {
        for (const step of steps) {
          const attacker = ws[step.attacker];
          const victim = ws[step.attacker === "A" ? "B" : "A"];
          const id = step.unprefixed ? stripPrefix : (raw: string) => raw;
          const op = step.operation;
          const path = op.path(attacker, victim, id);
          const body = op.body?.(attacker, victim, id);
          const reply = await call(attacker.token, op.method, path, body);
          const phantom = phantomOf(victim);
          const control = await call(
            attacker.token,
            op.method,
            op.path(attacker, phantom, id),
            op.body?.(attacker, phantom, id),
          );
          checkReply(step, victim, reply, control, phantom, path + JSON.stringify(body ?? null));
        }
        expect(await snapshot(ws.A)).toEqual(before.A);
        expect(await snapshot(ws.B)).toEqual(before.B);
      }),
      { numRuns: 25, seed: 7 },
    );
  });

  it("an Idempotency-Key reused by the other workspace never replays the first workspace's response", async () => {
    const key = "isolation-shared-key";
    const body = { name: "same-body", createDatabase: false };
    const first = dataOf<{ id: string }>(
      await call(ws.A.token, "POST", "/v1/projects", body, { "idempotency-key": key }),
      "A create",
    );
    const second = await call(ws.B.token, "POST", "/v1/projects", body, { "idempotency-key": key });
    expect(JSON.stringify(second.body)).not.toContain(first.id);
    if (second.status < 300) {
      const theirs = dataOf<{ id: string }>(second, "B create");
      // B got its own project, visible to B and not to A.
      expect((await call(ws.B.token, "GET", `/v1/projects/${theirs.id}`)).status).toBe(200);
      expect((await call(ws.A.token, "GET", `/v1/projects/${theirs.id}`)).status).toBe(404);
      expect((await call(ws.B.token, "DELETE", `/v1/projects/${theirs.id}`)).status).toBe(204);
    }
    expect((await call(ws.A.token, "DELETE", `/v1/projects/${first.id}`)).status).toBe(204);
  });

  it("each workspace's credentials still connect after the attacks", async () => {
    for (const w of [ws.A, ws.B]) {
      const client = new pg.Client({ connectionString: w.connectionString });
      await client.connect();
      try {
        const result = await client.query<{ one: number }>("select 1 as one");
        expect(result.rows[0]?.one).toBe(1);
      } finally {
        await client.end();
      }
    }
  });
});
