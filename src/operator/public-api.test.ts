import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createFakeKube, type FakeKube } from "../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { databaseHandler } from "../resources/database/controller.ts";
import { projectHandler } from "../resources/project/controller.ts";
import { DatabaseType, ProjectType } from "../resources/types.ts";
import { annotations, decodeData, encodeData } from "./secret/render.ts";
import { createCredentialPool } from "./credentials.ts";
import type { EventRecorder } from "./events.ts";
import { connectionNameOf } from "./identity.ts";
import { reconcileManaged, type LoopDeps } from "./managed-reconciler.ts";
import type { Outcome } from "./outcome.ts";
import { FakeApiError, createFakeApi, type FakeApi } from "../../test/support/fake-api.ts";
import { stallingReasons } from "../resources/index.ts";
import { createRemoteMirror } from "../resources/remote/mirror.ts";
import type { MdsRemote } from "../resources/remote/remote-api.ts";
import { createAcceptedIds } from "./accepted.ts";

// The operator's promises against the public Management API (the fake's public mode: Idempotency-Key ignored, no
// replay announced, its status codes and legal nulls): no duplicate database, no lost or leaked credentials, every
// finalizer completes and none is dropped while its remote object may exist. Where a promise must hold against
// our own service as well, the test runs against both.

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let events: { type: string; reason: string; message: string }[];
let runDatabase: (name: string) => Promise<Outcome>;
let runProject: (name: string) => Promise<Outcome>;
let projectId: string;

function setUp(publicApi: boolean) {
  kube = createFakeKube();
  api = createFakeApi({ publicApi });
  events = [];
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "t0ken-planted" }),
  });
  const logger = pino({ level: "silent" });
  const recorder: EventRecorder = { record: (_o, type, reason, message) => events.push({ type, reason, message }) };
  const pool = createCredentialPool<MdsRemote>({
    createMirror: createRemoteMirror,
    kube,
    apiUrl: "http://api.invalid",
    createApiClient: () => api,
    logger,
    pollIntervals: poll,
    onRemoteChange: () => {},
  });
  const common = {
    kube,
    secrets: kube.cache<Secret>(SecretType),
    events: recorder,
    logger,
    pollIntervals: poll,
    crashPoint: () => {},
  };
  const kindDeps = {
    pool,
    defaultCredentials: {
      secretNamespace: "ops",
      secretName: "mds-credentials",
      key: "token",
      fallbackNamespaces: "*" as const,
    },
    instanceId: "unit",
    accepted: createAcceptedIds(),
    cache: (kind: string) => kube.cache(kind === "Project" ? ProjectType : DatabaseType),
  };
  const databaseDeps: LoopDeps = { ...common, stalling: new Set(stallingReasons()), objects: kube.cache(DatabaseType) };
  const projectDeps: LoopDeps = { ...common, stalling: new Set(stallingReasons()), objects: kube.cache(ProjectType) };
  const databases = databaseHandler(kindDeps);
  const projects = projectHandler(kindDeps);
  runDatabase = (name) => reconcileManaged(databaseDeps, databases, `default/${name}`);
  runProject = (name) => reconcileManaged(projectDeps, projects, `default/${name}`);
}

async function withProject() {
  const project = await api.createProject({ name: "shop", createDatabase: false });
  projectId = project.id;
  kube.put(ProjectType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "shop", namespace: "default" },
    spec: {},
    status: { id: project.id },
  });
}

function applyDatabase(name: string, spec: object = {}) {
  kube.put(DatabaseType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: "default" },
    spec: { projectRef: { name: "shop" }, ...spec },
  });
}
const objectOf = (type: typeof DatabaseType, name: string) => kube.read<KubeObject>(type, "default", name);
type Status = {
  id?: string;
  conditions?: { type: string; status: string; reason: string; message: string }[];
  connection?: { id: string };
};
const statusOf = (type: typeof DatabaseType, name: string) => (objectOf(type, name)?.["status"] ?? {}) as Status;
const condition = (type: typeof DatabaseType, name: string, c: string) =>
  statusOf(type, name).conditions?.find((x) => x.type === c);
const secret = (name: string) => kube.read<Secret>(SecretType, "default", name);
/** The ids of a database's connections that still exist. */
const liveConnections = async (databaseId: string) => (await api.getDatabase(databaseId)).connections.map((c) => c.id);

afterEach(() => {
  vi.useRealTimers();
});
/** Each round is a requeue: the fast interval passes on a fake clock (only Date is faked). */
async function converge(run: () => Promise<Outcome>, rounds = 6, stepMs = poll.fastMs) {
  vi.useFakeTimers({ toFake: ["Date"] });
  for (let i = 0; i < rounds; i++) {
    vi.setSystemTime(Date.now() + stepMs);
    await run();
  }
}

describe("the operator against the public API", () => {
  beforeEach(async () => {
    setUp(true);
    await withProject();
  });

  it("creates with POST /v1/databases; a creation whose answer was lost is found by logicalId, not created again", async () => {
    applyDatabase("orders");
    api.loseNextResponse("createDatabase", new FakeApiError("unavailable", 503, "connection reset"));
    expect((await runDatabase("orders")).type).toBe("error");
    await converge(() => runDatabase("orders"));
    expect(api.databases.size).toBe(1);
    expect(api.calls["createDatabase"]).toBe(1);
    const [only] = [...api.databases.values()];
    expect(statusOf(DatabaseType, "orders").id).toBe(only!.id);
    expect(condition(DatabaseType, "orders", "Ready")).toMatchObject({ status: "True" });
    // The lost answer's credentials are gone for good: a connection was minted and the original one revoked.
    const published = statusOf(DatabaseType, "orders").connection!.id;
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(published));
    expect(await liveConnections(only!.id)).toEqual([published]);
  });

  it("revokes by name a connection minted by an attempt whose answer was lost", async () => {
    applyDatabase("orders");
    await converge(() => runDatabase("orders"));
    const id = statusOf(DatabaseType, "orders").id!;
    await kube.delete(SecretType, "default", "orders");
    api.loseNextResponse("createConnection", new FakeApiError("unavailable", 503, "connection reset"));
    expect((await runDatabase("orders")).type).toBe("error");
    await converge(() => runDatabase("orders"));
    const ours = (await api.getDatabase(id)).connections.filter(
      (c) => c.name === connectionNameOf("unit", "Database", "default", "orders"),
    );
    expect(api.calls["createConnection"]).toBe(2);
    expect(ours.map((c) => c.id)).toEqual([statusOf(DatabaseType, "orders").connection!.id]);
    expect(await liveConnections(id)).toEqual([statusOf(DatabaseType, "orders").connection!.id]);
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(ours[0]!.id));
  });

  it("sets isDefault at creation only and never PATCHes it", async () => {
    const other = await api.createDatabase({ projectId, name: "legacy" });
    applyDatabase("legacy", { externalId: other.id, isDefault: true });
    await converge(() => runDatabase("legacy"));
    expect(api.calls["updateDatabase"] ?? 0).toBe(0);
    expect(condition(DatabaseType, "legacy", "Synced")).toMatchObject({ status: "True" });
    applyDatabase("fresh", { isDefault: true });
    await converge(() => runDatabase("fresh"));
    expect(api.databases.get(statusOf(DatabaseType, "fresh").id!)?.isDefault).toBe(true);
  });

  it("waits for the project when asked to delete the project's default database (403), then finishes", async () => {
    const project = await api.createProject({ name: "with-default", logicalId: "x" });
    const defaultDb = project.database!;
    kube.put(ProjectType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "other", namespace: "default" },
      spec: {},
      status: { id: project.id },
    });
    applyDatabase("main", { projectRef: { name: "other" }, externalId: defaultDb.id, deletionPolicy: "Delete" });
    await converge(() => runDatabase("main"));
    await kube.delete(DatabaseType, "default", "main");
    await runDatabase("main");
    expect(condition(DatabaseType, "main", "Ready")).toMatchObject({ status: "False", reason: "WaitingForProject" });
    expect(condition(DatabaseType, "main", "Synced")).toMatchObject({ status: "True" });
    await api.deleteProject(project.id);
    await converge(() => runDatabase("main"), 2, poll.slowMs * 3);
    expect(objectOf(DatabaseType, "main")).toBeUndefined();
  });

  it("deletes a project after its other databases, its default database with it (no 403 or 400 as an error)", async () => {
    kube.put(ProjectType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "temp", namespace: "default" },
      spec: { deletionPolicy: "Delete", connectionSecret: { name: "temp-db" } },
    });
    await converge(() => runProject("temp"));
    const id = statusOf(ProjectType, "temp").id!;
    expect(condition(ProjectType, "temp", "Ready")).toMatchObject({ status: "True" });
    const extra = await api.createDatabase({ projectId: id, name: "extra" });
    await kube.delete(ProjectType, "default", "temp");
    await runProject("temp");
    expect(condition(ProjectType, "temp", "Ready")).toMatchObject({ status: "False", reason: "WaitingForDatabases" });
    // A database created between the list and the DELETE: the public API's 400 is a wait too.
    await api.deleteDatabase(extra.id);
    api.failNext(
      "deleteProject",
      new FakeApiError("invalid_request", 400, "Project cannot be deleted due to existing dependencies"),
    );
    await runProject("temp");
    expect(condition(ProjectType, "temp", "Ready")).toMatchObject({ status: "False", reason: "WaitingForDatabases" });
    expect(condition(ProjectType, "temp", "Synced")).toMatchObject({ status: "True" });
    await runProject("temp");
    expect(objectOf(ProjectType, "temp")).toBeUndefined();
    expect(api.projects.has(id)).toBe(false);
    expect(api.databases.size).toBe(0);
    expect(events.some((e) => e.reason === "CredentialsInvalid" || e.reason === "InvalidSpec")).toBe(false);
  });

  it("says in a condition that the service sends no connection string, and leaks no connection", async () => {
    api.connectionStrings = false;
    applyDatabase("orders");
    await converge(() => runDatabase("orders"));
    const id = statusOf(DatabaseType, "orders").id!;
    expect(id).toBeDefined();
    expect(api.databases.size).toBe(1);
    // The first answer without a connection string is named in an Event and the Synced condition; every
    // connection minted on the way had no usable password, so all are revoked and Ready says what is missing.
    expect(events.find((e) => e.reason === "RemoteIncomplete")?.message).toContain("without a connection string");
    expect(condition(DatabaseType, "orders", "Ready")).toMatchObject({ status: "False", reason: "RemoteIncomplete" });
    expect(condition(DatabaseType, "orders", "Ready")?.message).toContain("no connection with a direct endpoint");
    expect(await liveConnections(id)).toEqual([]);
    expect(api.calls["createConnection"]).toBe(1);
    expect(secret("orders")).toBeUndefined();
  });

  it("marks only the object the service answers about unreadably, and keeps reconciling the others", async () => {
    applyDatabase("orders");
    applyDatabase("users");
    await converge(() => runDatabase("orders"));
    await converge(() => runDatabase("users"));
    const broken = statusOf(DatabaseType, "orders").id!;
    const getDatabase = api.getDatabase.bind(api);
    api.getDatabase = async (id, options) => {
      if (id === broken)
        throw Object.assign(new Error(`cannot get database "${id}": contract_violation: data.status: Invalid input`), {
          code: "contract_violation",
        });
      return getDatabase(id, options);
    };
    api.unreadableItems = 1;
    api.databases.get(broken)!.name = "renamed-elsewhere";
    await converge(() => runDatabase("orders"), 2, poll.slowMs * 3);
    await converge(() => runDatabase("users"), 2, poll.slowMs * 3);
    expect(condition(DatabaseType, "orders", "Synced")).toMatchObject({ status: "False", reason: "RemoteUnreadable" });
    expect(condition(DatabaseType, "orders", "Synced")?.message).toContain("data.status");
    expect(condition(DatabaseType, "users", "Synced")).toMatchObject({ status: "True" });
    expect(condition(DatabaseType, "users", "Ready")).toMatchObject({ status: "True" });
  });

  it("writes no remote status it does not know into status (the CRD's closed set): Ready says RemoteUnreadable, and comes back", async () => {
    applyDatabase("orders");
    await converge(() => runDatabase("orders"));
    const id = statusOf(DatabaseType, "orders").id!;
    const secretVersion = secret("orders")?.metadata.resourceVersion;
    // A status a newer service added (the public API's enum is open).
    (api.databases.get(id)! as { status: string }).status = "hibernating";
    await converge(() => runDatabase("orders"), 2, poll.slowMs * 3);
    expect(condition(DatabaseType, "orders", "Ready")).toMatchObject({ status: "False", reason: "RemoteUnreadable" });
    expect(condition(DatabaseType, "orders", "Ready")?.message).toContain('"hibernating"');
    expect(statusOf(DatabaseType, "orders")).not.toHaveProperty("remoteStatus");
    expect(statusOf(DatabaseType, "orders").id).toBe(id);
    (api.databases.get(id)! as { status: string }).status = "ready";
    await converge(() => runDatabase("orders"), 2, poll.slowMs * 3);
    expect(condition(DatabaseType, "orders", "Ready")).toMatchObject({ status: "True" });
    expect(statusOf(DatabaseType, "orders")).toMatchObject({ remoteStatus: "ready" });
    expect(secret("orders")?.metadata.resourceVersion).toBe(secretVersion);
  });

  it("finds a project whose creation answer was lost, creating none twice and leaking no connection", async () => {
    kube.put(ProjectType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "app", namespace: "default" },
      spec: { connectionSecret: { name: "app-db" } },
    });
    api.loseNextResponse("createProject", new FakeApiError("unavailable", 503, "connection reset"));
    expect((await runProject("app")).type).toBe("error");
    await converge(() => runProject("app"));
    expect(api.projects.size).toBe(2);
    expect(api.calls["createProject"]).toBe(2);
    const project = api.projects.get(statusOf(ProjectType, "app").id!)!;
    const db = [...api.databases.values()].find((d) => d.project.id === project.id)!;
    const live = await liveConnections(db.id);
    expect(live).toHaveLength(1);
    expect(decodeData(kube.read<Secret>(SecretType, "default", "app-db")!)["PGPASSWORD"]).toBe(
      api.passwords.get(live[0]!),
    );
  });

  it("rewrites a Secret's hosts and ports when the service moves the database, keeping the credentials", async () => {
    applyDatabase("orders");
    await converge(() => runDatabase("orders"));
    const id = statusOf(DatabaseType, "orders").id!;
    const before = secret("orders")!;
    const password = decodeData(before)["PGPASSWORD"];
    api.moveEndpoints(id, { host: "db2.example", directPort: 7000, pooledPort: 7001 });
    await converge(() => runDatabase("orders"), 1, poll.slowMs * 3);
    const after = secret("orders")!;
    const data = decodeData(after);
    expect(data["PGPASSWORD"]).toBe(password);
    expect(data["PGHOST"]).toBe("db2.example");
    expect(data["DATABASE_URL"]).toContain("@db2.example:7001/");
    expect(data["DIRECT_URL"]).toContain("@db2.example:7000/");
    expect(after.metadata.annotations?.[annotations.dataHash]).not.toBe(
      before.metadata.annotations?.[annotations.dataHash],
    );
    expect(api.calls["createConnection"] ?? 0).toBe(0);
  });
});

describe.each([
  ["the public API", true],
  ["our service", false],
])("a Delete-policy finalizer against %s", (_name, publicApi) => {
  beforeEach(async () => {
    setUp(publicApi);
    await withProject();
  });

  /** A Database whose creation landed but whose id was never recorded, then deleted. */
  async function deletedWithoutId() {
    applyDatabase("orders", { deletionPolicy: "Delete" });
    api.loseNextResponse("createDatabase", new FakeApiError("unavailable", 503, "connection reset"));
    await runDatabase("orders");
    expect(statusOf(DatabaseType, "orders").id).toBeUndefined();
    expect(api.databases.size).toBe(1);
    await kube.delete(DatabaseType, "default", "orders");
  }

  it("is kept while the lookup by logicalId fails, and completes once the service answers", async () => {
    await deletedWithoutId();
    api.outage = new FakeApiError("unavailable", 503, "down");
    await runDatabase("orders");
    expect(objectOf(DatabaseType, "orders")).toBeDefined();
    expect(events.some((e) => e.reason === "Deleted")).toBe(false);
    api.outage = undefined;
    await runDatabase("orders");
    expect(objectOf(DatabaseType, "orders")).toBeUndefined();
    expect(api.databases.size).toBe(0);
  });

  it("is kept while the service's answer holds an item the operator cannot read", async () => {
    await deletedWithoutId();
    api.unreadableItems = 1;
    const hidden = [...api.databases.values()][0]!;
    api.databases.delete(hidden.id);
    await runDatabase("orders");
    expect(objectOf(DatabaseType, "orders")).toBeDefined();
    expect(condition(DatabaseType, "orders", "Synced")).toMatchObject({ status: "False", reason: "RemoteUnreadable" });
  });
});
