import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createClient,
  NetworkError,
  NotFoundError,
  UnavailableError,
  type ClientOptions,
} from "../../src/client/index.ts";
import { newId } from "../../src/contract/index.ts";
import {
  databaseJson,
  errorReply,
  fakeClock,
  plantedToken,
  projectJson,
  reply,
  resetConnection,
  startScriptedServer,
} from "./helpers.ts";

// The client against what the public Management API may legally send (its SDK types): legal nulls, values our
// service never sends, unknown error codes, no replay of Idempotency-Key (so no re-sent POST).

let server: Awaited<ReturnType<typeof startScriptedServer>>;
beforeAll(async () => {
  server = await startScriptedServer();
});
afterAll(() => server.close());

function makeClient(overrides: Partial<ClientOptions> = {}) {
  const warnings: { obj: object; msg: string }[] = [];
  const skipped: string[] = [];
  const client = createClient({
    baseUrl: server.url,
    token: plantedToken(),
    clock: fakeClock(),
    random: () => 0.5,
    logger: { debug: () => {}, warn: (obj, msg) => warnings.push({ obj, msg }) },
    hooks: { onSkippedItem: (e) => skipped.push(e.operation) },
    ...overrides,
  });
  return { client, warnings, skipped };
}

/** A console-made clone: every legal null and every value our own service never sends. */
function foreignClone() {
  const base = databaseJson();
  const [connection] = base.connections;
  return {
    ...base,
    status: "ready",
    defaultConnectionId: null,
    region: null,
    source: { type: "database", databaseId: newId("database") },
    branchId: null,
    logicalId: null,
    createdAt: "2026-01-01T00:00:00+00:00",
    connections: [
      {
        ...connection,
        kind: "accelerate",
        endpoints: { accelerate: { host: "accelerate.example", port: 443 } },
        directConnection: null,
      },
    ],
  };
}

describe("the client against the public API's shapes", () => {
  it("reads a database with every legal null and a clone source", async () => {
    const { client } = makeClient();
    const clone = foreignClone();
    server.script([reply(200, { data: clone })]);
    const db = await client.getDatabase(clone.id);
    expect(db).toMatchObject({ region: null, defaultConnectionId: null, source: { type: "database" } });
    expect(db.connections[0]?.kind).toBe("accelerate");
  });

  it("reads creation responses without connection strings, with null connectionString and directConnection", async () => {
    const { client } = makeClient();
    const db = databaseJson({ status: "provisioning", region: null });
    server.script([reply(201, { data: db })]);
    const created = await client.createDatabase({ projectId: db.project.id, logicalId: "k8s:x:ns/a" });
    expect(created.connections[0]?.endpoints.direct?.connectionString).toBeUndefined();

    const { project: _p, ...nested } = databaseJson();
    const project = projectJson({
      defaultRegion: null,
      database: { ...nested, connectionString: null, directConnection: null, apiKeys: [] },
    });
    server.script([reply(201, { data: project })]);
    const madeProject = await client.createProject({ name: "shop" });
    expect(madeProject.defaultRegion).toBeNull();
    expect(madeProject.database?.connectionString).toBeNull();
  });

  it("reads backups of any type, without size, in status unknown, with a null page limit", async () => {
    const { client } = makeClient();
    const backup = {
      id: newId("backup"),
      backupType: "incremental",
      status: "unknown",
      createdAt: "2026-01-01T00:00:00Z",
    };
    server.script([
      reply(200, { data: [backup], meta: { backupRetentionDays: 7 }, pagination: { hasMore: false, limit: null } }),
    ]);
    const list = await client.listBackups(newId("database"));
    expect(list.data).toEqual([backup]);
  });

  it("leaves one unreadable item out of its page, counts it each time and logs it once", async () => {
    const { client, warnings, skipped } = makeClient();
    const good = databaseJson();
    const bad = { ...databaseJson(), status: 7, connections: "postgresql://u:secret-pass@h/db" };
    const page = { data: [good, bad], pagination: { hasMore: false, nextCursor: null } };
    server.script([reply(200, page), reply(200, page)]);
    const first = await client.listDatabases();
    const second = await client.listDatabases();
    expect(first.data.map((d) => d.id)).toEqual([good.id]);
    expect(first.skipped).toBe(1);
    expect(second.skipped).toBe(1);
    expect(skipped).toEqual(["listDatabases", "listDatabases"]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.obj).toMatchObject({ operation: "listDatabases", id: bad.id });
    expect(JSON.stringify(warnings)).not.toContain("secret-pass");
  });

  it("reads an error body without hint, and an unknown code by its HTTP status", async () => {
    const { client } = makeClient();
    server.script([reply(404, { error: { code: "P2025", message: "Database not found" } })]);
    const error = await client.getDatabase(newId("database")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({ code: "not_found", hint: undefined });
    expect((error as Error).message).toContain("Database not found (P2025)");
  });

  it("accepts 200 for a created connection", async () => {
    const { client } = makeClient();
    const [connection] = databaseJson().connections;
    server.script([
      reply(200, {
        data: {
          ...connection,
          endpoints: { direct: { host: "h", port: 5432, connectionString: "postgresql://u:p@h:5432/d" } },
        },
      }),
    ]);
    const created = await client.createConnection(newId("database"), { name: "k8s-ns-a" });
    expect(created.endpoints.direct?.connectionString).toBeDefined();
  });
});

describe("re-sending a POST", () => {
  it("never re-sends a POST that may have reached a server that has not announced replay, Idempotency-Key or not", async () => {
    const { client } = makeClient();
    server.script([resetConnection], reply(201, { data: databaseJson() }));
    const lost = await client
      .createDatabase({ projectId: newId("project"), logicalId: "k8s:x:ns/a" }, { idempotencyKey: "k1" })
      .catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(NetworkError);
    expect(server.requests).toHaveLength(1);

    server.script([errorReply(503, "unavailable", "down")], reply(200, { data: databaseJson() }));
    const restore = client.restoreDatabase(
      newId("database"),
      { source: { type: "backup", databaseId: newId("database"), backupId: newId("backup") } },
      { idempotencyKey: "r1" },
    );
    expect(await restore.catch((e: unknown) => e)).toBeInstanceOf(UnavailableError);
    expect(server.requests).toHaveLength(1);
    expect(client.replaysIdempotencyKeys()).toBe(false);
  });

  it("re-sends a POST the server did not act on (429) to any server", async () => {
    const { client } = makeClient();
    server.script([
      errorReply(429, "rate_limited", "slow down", { "retry-after": "1" }),
      reply(201, { data: databaseJson() }),
    ]);
    await client.createDatabase({ projectId: newId("project") });
    expect(server.requests).toHaveLength(2);
  });

  it("re-sends a POST with its Idempotency-Key once the server has announced replay", async () => {
    const { client } = makeClient();
    server.script([reply(200, { data: databaseJson() }, { "x-idempotency-replay": "86400" })]);
    await client.getDatabase(newId("database"));
    expect(client.replaysIdempotencyKeys()).toBe(true);
    server.script([resetConnection, reply(201, { data: databaseJson() })]);
    await client.createDatabase({ projectId: newId("project"), logicalId: "k8s:x:ns/a" }, { idempotencyKey: "k1" });
    expect(server.requests.map((r) => r.headers["idempotency-key"])).toEqual(["k1", "k1"]);
  });
});
