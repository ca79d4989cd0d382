import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createFakeKube, type FakeKube } from "../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { databaseHandler } from "../resources/database/controller.ts";
import { DatabaseType, ProjectType } from "../resources/types.ts";
import { decodeData, encodeData } from "./secret/render.ts";
import { createCredentialPool } from "./credentials.ts";
import { idempotencyKeyOf, incarnationKeyOf, logicalIdOf } from "./identity.ts";
import { classifyError } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { reconcileManaged, type LoopDeps } from "./managed-reconciler.ts";
import { applyOutcome, type Outcome } from "./outcome.ts";
import { createWorkQueue } from "./work-queue.ts";
import { FakeApiError, createFakeApi, type FakeApi } from "../../test/support/fake-api.ts";
import { stallingReasons } from "../resources/index.ts";
import { createRemoteMirror } from "../resources/remote/mirror.ts";
import type { MdsRemote } from "../resources/remote/remote-api.ts";
import { createAcceptedIds } from "./accepted.ts";

// The generic loop with the Database kind, against a fake kube seam and a fake service: state is asserted, not
// call sequences, except where the count of calls or writes is the behaviour (steady state, no duplicates).

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let events: { type: string; reason: string; message: string }[];
let crash: string | undefined;
let run: (name: string) => Promise<Outcome>;

beforeEach(async () => {
  kube = createFakeKube();
  api = createFakeApi();
  events = [];
  crash = undefined;
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "t0ken-planted" }),
  });
  const project = await api.createProject({ name: "shop", createDatabase: false });
  kube.put(ProjectType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "shop", namespace: "default" },
    spec: {},
    status: { id: project.id },
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
  // The Database loop records the ids it accepts where its clones' sources are read (src/operator/accepted.ts).
  const accepted = createAcceptedIds();
  const deps: LoopDeps = {
    kube,
    accepted,
    stalling: new Set(stallingReasons()),
    objects: kube.cache(DatabaseType),
    secrets: kube.cache<Secret>(SecretType),
    events: recorder,
    logger,
    pollIntervals: poll,
    crashPoint: (name) => {
      if (name === crash) {
        crash = undefined;
        throw new Error(`simulated crash at ${name}`);
      }
    },
  };
  const kind = databaseHandler({
    pool,
    defaultCredentials: {
      secretNamespace: "ops",
      secretName: "mds-credentials",
      key: "token",
      fallbackNamespaces: "*" as const,
    },
    instanceId: "unit",
    accepted,
    cache: (kind: string) => kube.cache(kind === "Project" ? ProjectType : DatabaseType),
  });
  run = (name) => reconcileManaged(deps, kind, `default/${name}`);
});

function applyDatabase(name: string, spec: object = { projectRef: { name: "shop" } }) {
  kube.put(DatabaseType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: "default" },
    spec,
  });
}
const db = (name: string) => kube.read<KubeObject>(DatabaseType, "default", name)!;
const statusOf = (name: string) =>
  db(name)["status"] as {
    id?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
    connection?: { id: string };
  };
const condition = (name: string, type: string) => statusOf(name).conditions?.find((c) => c.type === type);
const secret = (name: string) => kube.read<Secret>(SecretType, "default", name);

// Each round of converge is a requeue: the fast interval passes on a fake clock (only Date is faked), so an
// entry the mirror holds as provisioning is read again, as it would be after the real requeue delay.
afterEach(() => {
  vi.useRealTimers();
});
async function converge(name: string, rounds = 6) {
  vi.useFakeTimers({ toFake: ["Date"] });
  let outcome: Outcome = { type: "done" };
  for (let i = 0; i < rounds; i++) {
    vi.setSystemTime(Date.now() + poll.fastMs);
    outcome = await run(name);
  }
  return outcome;
}

describe("the managed loop (Database)", () => {
  it("creates once, writes the Secret before status, becomes Ready, then writes and calls nothing while nothing changes", async () => {
    applyDatabase("orders");
    await converge("orders");
    expect(api.databases.size).toBe(1);
    expect(condition("orders", "Ready")).toMatchObject({ status: "True", reason: "Available" });
    expect(condition("orders", "Synced")).toMatchObject({ status: "True", reason: "ReconcileSuccess" });
    const firstSecretWrite = kube.writes.findIndex((w) => w.resource === "secrets");
    const firstStatusWrite = kube.writes.findIndex((w) => w.resource === "databases/status");
    expect(firstSecretWrite).toBeGreaterThanOrEqual(0);
    expect(firstSecretWrite).toBeLessThan(firstStatusWrite);
    const data = decodeData(secret("orders")!);
    const connectionId = statusOf("orders").connection!.id;
    expect(data["PGPASSWORD"]).toBe(api.passwords.get(connectionId));
    expect(data["DATABASE_URL"]).toContain("pool.example:6432");
    expect(data["DIRECT_URL"]).toContain("db.example:5432");

    const writes = kube.writes.length;
    const calls = JSON.stringify(api.calls);
    const outcome = await run("orders");
    expect(outcome).toEqual({ type: "requeueAfter", ms: poll.slowMs });
    expect(kube.writes.length).toBe(writes);
    expect(JSON.stringify(api.calls)).toBe(calls);
  });

  it("after a crash between the POST and the Secret, past the replay window, adopts, mints a connection and revokes the lost one", async () => {
    applyDatabase("orders");
    crash = "database:after-create";
    const crashed = await run("orders");
    expect(crashed.type).toBe("error");
    expect(secret("orders")).toBeUndefined();
    const original = [...api.databases.values()][0]!.defaultConnectionId;
    api.expireReplays();
    await converge("orders");
    expect(api.databases.size).toBe(1);
    const connectionId = statusOf("orders").connection!.id;
    expect(connectionId).not.toBe(original);
    expect(api.passwords.has(original)).toBe(false);
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(connectionId));
    expect(condition("orders", "Ready")?.status).toBe("True");
    expect(events.map((e) => e.reason)).toEqual(
      expect.arrayContaining(["Adopted", "SecretRebuilt", "ConnectionRevoked"]),
    );
  });

  it("after a crash between a rebuilt Secret and the revocation, the restarted loop revokes the replaced connection", async () => {
    applyDatabase("orders");
    await converge("orders");
    const before = statusOf("orders").connection!.id;
    api.expireReplays();
    await kube.delete(SecretType, "default", "orders");
    crash = "database:before-revoke";
    expect((await run("orders")).type).toBe("error");
    expect(api.passwords.has(before)).toBe(true);
    await converge("orders", 2);
    const after = statusOf("orders").connection!.id;
    expect(after).not.toBe(before);
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(after));
    expect(api.passwords.has(before)).toBe(false);
    expect(events.map((e) => e.reason)).toContain("ConnectionRevoked");
  });

  it("after a crash before revoking what a recovery replaced, when status named no connection yet, still revokes it", async () => {
    applyDatabase("orders");
    crash = "database:after-create";
    await run("orders");
    const original = [...api.databases.values()][0]!.defaultConnectionId;
    api.expireReplays();
    crash = "database:before-revoke";
    for (let i = 0; i < 3 && crash !== undefined; i++) await run("orders");
    expect(crash).toBeUndefined();
    expect(api.passwords.has(original)).toBe(true);
    await converge("orders", 2);
    const current = statusOf("orders").connection!.id;
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(current));
    expect(api.passwords.has(original)).toBe(false);
    expect(secret("orders")!.metadata.annotations?.["mds.dev/revoke"]).toBeUndefined();
  });

  it("within the replay window, recovers the original credentials without minting", async () => {
    applyDatabase("orders");
    crash = "database:after-create";
    await run("orders");
    await converge("orders");
    const d = [...api.databases.values()][0]!;
    expect(statusOf("orders").connection!.id).toBe(d.defaultConnectionId);
    expect(api.calls["createConnection"] ?? 0).toBe(0);
  });

  it("undoes an edit of DATABASE_URL from the intact credentials, and mints new ones when PGPASSWORD was edited", async () => {
    applyDatabase("orders");
    await converge("orders");
    const s = secret("orders")!;
    const good = decodeData(s);
    kube.put(SecretType, { ...s, data: encodeData({ ...good, DATABASE_URL: "postgresql://x:y@evil/z" }) });
    await converge("orders", 2);
    expect(decodeData(secret("orders")!)).toEqual(good);
    expect(api.calls["createConnection"] ?? 0).toBe(0);

    // Within the replay window the original credentials come back; past it, new ones are minted and the
    // connection whose password was lost is revoked.
    api.expireReplays();
    const s2 = secret("orders")!;
    kube.put(SecretType, { ...s2, data: encodeData({ ...good, PGPASSWORD: "guess" }) });
    const before = statusOf("orders").connection!.id;
    await converge("orders", 2);
    const after = statusOf("orders").connection!.id;
    expect(after).not.toBe(before);
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(after));
    expect(api.passwords.has(before)).toBe(false);
  });

  it("reports an API outage in Synced=False with the cause, backs off, and converges once the service is back", async () => {
    applyDatabase("orders");
    api.outage = new FakeApiError(
      "unavailable",
      503,
      "cannot list databases: unavailable: the service cannot reach PostgreSQL",
    );
    const outcome = await run("orders");
    expect(outcome.type).toBe("error");
    expect(classifyError((outcome as { error: unknown }).error)).toMatchObject({
      reason: "ApiUnavailable",
      terminal: false,
    });
    expect(condition("orders", "Synced")).toMatchObject({ status: "False", reason: "ApiUnavailable" });
    expect(condition("orders", "Synced")?.message).toContain("unavailable");
    api.outage = undefined;
    await converge("orders");
    expect(condition("orders", "Ready")?.status).toBe("True");
    expect(condition("orders", "Synced")?.status).toBe("True");
  });

  it("refuses a spec it cannot act on without calling the service (terminal until the spec changes)", async () => {
    applyDatabase("bad", { projectRef: { name: "shop" }, region: "mars-north-1" });
    const outcome = await run("bad");
    expect(classifyError((outcome as { error: unknown }).error)).toMatchObject({
      reason: "InvalidSpec",
      terminal: true,
    });
    expect(condition("bad", "Synced")).toMatchObject({ status: "False", reason: "InvalidSpec" });
    expect(condition("bad", "Synced")?.message).toContain("region");
    expect(api.calls["createDatabase"] ?? 0).toBe(0);
  });

  it("looks at a refused adoption again after the settled interval (a fixed token is no spec change); other terminal errors wait for the spec", async () => {
    applyDatabase("legacy", { projectRef: { name: "shop" }, externalId: "db_c000000000000000000000999" });
    const refused = await run("legacy");
    expect(refused.type).toBe("error");
    const refusedError = (refused as { error: unknown }).error;
    expect(classifyError(refusedError)).toEqual({
      reason: "AdoptionRefused",
      terminal: true,
      conflict: false,
      retryAfterMs: poll.slowMs,
    });
    expect(condition("legacy", "Synced")).toMatchObject({ status: "False", reason: "AdoptionRefused" });
    expect(api.calls["createDatabase"] ?? 0).toBe(0);
    applyDatabase("bad", { projectRef: { name: "shop" }, region: "mars-north-1" });
    const invalid = await run("bad");
    const invalidError = (invalid as { error: unknown }).error;
    expect(classifyError(invalidError)).toMatchObject({ reason: "InvalidSpec", terminal: true });
    expect(classifyError(invalidError).retryAfterMs).toBeUndefined();

    // The work queue runs the refused key once more after slowMs (not sooner, no backoff); the invalid spec never.
    vi.useFakeTimers();
    const queue = createWorkQueue();
    const runs: string[] = [];
    queue.start(async (key) => {
      runs.push(key);
    }, 1);
    applyOutcome(queue, "default/legacy", refused);
    applyOutcome(queue, "default/bad", invalid);
    expect(queue.failures("default/legacy")).toBe(0);
    await vi.advanceTimersByTimeAsync(poll.slowMs - 1);
    expect(runs).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toEqual(["default/legacy"]);
    await vi.advanceTimersByTimeAsync(10 * poll.slowMs);
    expect(runs).toEqual(["default/legacy"]);
    await queue.stop();
  });

  it("waits for a missing project and a missing credentials Secret with a reason that says so", async () => {
    applyDatabase("lonely", { projectRef: { name: "nope" } });
    await run("lonely");
    expect(condition("lonely", "Synced")).toMatchObject({ status: "False", reason: "ProjectNotReady" });
    applyDatabase("nocreds", { projectRef: { name: "shop" }, credentials: { secretRef: { name: "missing" } } });
    await run("nocreds");
    expect(condition("nocreds", "Synced")).toMatchObject({ status: "False", reason: "CredentialsMissing" });
    expect(condition("nocreds", "Synced")?.message).toContain('"default/missing"');
    expect(api.databases.size).toBe(0);
  });

  it("requeues a 409 silently: no condition, no event", async () => {
    applyDatabase("orders");
    await converge("orders");
    // A worker that read the object before someone else wrote it: its write carries the old resourceVersion.
    const current = db("orders");
    const stale = { ...current, metadata: { ...current.metadata, finalizers: [] } };
    kube.put(DatabaseType, { ...current, metadata: { ...current.metadata, labels: { touched: "yes" } } });
    const before = events.length;
    const staleRun = await reconcileManaged(
      {
        kube,
        stalling: new Set(stallingReasons()),
        objects: { get: () => stale },
        secrets: kube.cache<Secret>(SecretType),
        events: { record: (_o, type, reason, message) => events.push({ type, reason, message }) },
        logger: pino({ level: "silent" }),
        pollIntervals: poll,
        crashPoint: () => {},
      },
      databaseHandler({
        pool: createCredentialPool<MdsRemote>({
          createMirror: createRemoteMirror,
          kube,
          apiUrl: "x",
          createApiClient: () => api,
          logger: pino({ level: "silent" }),
          pollIntervals: poll,
          onRemoteChange: () => {},
        }),
        defaultCredentials: {
          secretNamespace: "ops",
          secretName: "mds-credentials",
          key: "token",
          fallbackNamespaces: "*" as const,
        },
        instanceId: "unit",
        accepted: createAcceptedIds(),
        cache: (kind: string) => kube.cache(kind === "Project" ? ProjectType : DatabaseType),
      }),
      "default/orders",
    );
    expect(staleRun.type).toBe("error");
    expect(classifyError((staleRun as { error: unknown }).error).conflict).toBe(true);
    expect(events.slice(before).filter((e) => e.type === "Warning")).toEqual([]);
  });

  it("Retain releases the Secret and keeps the remote database; the finalizer goes without an API call", async () => {
    applyDatabase("orders");
    await converge("orders");
    const id = statusOf("orders").id!;
    await kube.delete(DatabaseType, "default", "orders");
    api.outage = new FakeApiError("unavailable", 503, "down");
    await run("orders");
    expect(kube.read(DatabaseType, "default", "orders")).toBeUndefined();
    expect(secret("orders")!.metadata.ownerReferences ?? []).toEqual([]);
    expect(secret("orders")!.metadata.labels?.["mds.dev/database-id"]).toBe(id);
    expect(api.databases.has(id)).toBe(true);
  });

  it("Delete removes the remote database and the Secret", async () => {
    applyDatabase("scratch", { projectRef: { name: "shop" }, deletionPolicy: "Delete" });
    await converge("scratch");
    // Only under Delete may garbage collection take the Secret; under Retain it never has an owner.
    expect(secret("scratch")!.metadata.ownerReferences?.map((r) => r.kind)).toEqual(["Database"]);
    applyDatabase("kept");
    await converge("kept");
    expect(secret("kept")!.metadata.ownerReferences ?? []).toEqual([]);
    expect(secret("kept")!.metadata.annotations?.["mds.dev/owner"]).toBe("Database/kept");
    const id = statusOf("scratch").id!;
    await kube.delete(DatabaseType, "default", "scratch");
    await run("scratch");
    expect(kube.read(DatabaseType, "default", "scratch")).toBeUndefined();
    expect(secret("scratch")).toBeUndefined();
    expect(api.databases.has(id)).toBe(false);
  });

  it("a Database deleted and applied again within the replay window gets a new database, not the deleted one's answer", async () => {
    applyDatabase("preview", { projectRef: { name: "shop" }, deletionPolicy: "Delete" });
    await converge("preview");
    const first = statusOf("preview").id!;
    await kube.delete(DatabaseType, "default", "preview");
    await run("preview");
    expect(api.databases.has(first)).toBe(false);
    applyDatabase("preview", { projectRef: { name: "shop" }, deletionPolicy: "Delete" });
    await converge("preview");
    const second = statusOf("preview").id!;
    expect(second).not.toBe(first);
    expect(api.databases.has(second)).toBe(true);
    expect(condition("preview", "Ready")?.status).toBe("True");
    expect(decodeData(secret("preview")!)["PGPASSWORD"]).toBe(
      api.passwords.get(api.databases.get(second)!.defaultConnectionId!),
    );
    expect(events.filter((e) => e.type === "Warning")).toEqual([]);
  });

  it("a resource gone while its reconcile ran (the cache had not seen it) is done, with no Warning", async () => {
    applyDatabase("scratch", { projectRef: { name: "shop" }, deletionPolicy: "Delete" });
    await converge("scratch");
    await kube.delete(DatabaseType, "default", "scratch");
    const patchOf = kube.patch.bind(kube);
    // Another reconcile of a stale copy dropped the finalizer first: the object is gone when this one patches.
    kube.patch = async (type, ns, name, patch) => {
      if (type.plural === DatabaseType.plural) kube.objects.delete(`${DatabaseType.plural}|default/scratch`);
      return patchOf(type, ns, name, patch);
    };
    expect(await run("scratch")).toEqual({ type: "done" });
    expect(events.filter((e) => e.type === "Warning")).toEqual([]);
  });

  it("adopts an existing remote database by externalId and mints a connection for its Secret, revoking nothing", async () => {
    const projectId = [...api.projects.keys()][0]!;
    const existing = await api.createDatabase({ projectId: projectId, name: "legacy" });
    applyDatabase("legacy", { projectRef: { name: "shop" }, externalId: existing.id });
    await converge("legacy");
    expect(statusOf("legacy").id).toBe(existing.id);
    expect(api.databases.size).toBe(1);
    expect(api.passwords.has(existing.defaultConnectionId!)).toBe(true);
    expect(condition("legacy", "Ready")?.status).toBe("True");
  });

  it("creates a database from the latest backup of another Database resource", async () => {
    applyDatabase("orders");
    await converge("orders");
    applyDatabase("copy", {
      projectRef: { name: "shop" },
      source: { type: "backup", databaseRef: { name: "orders" }, latest: true },
    });
    await converge("copy");
    // A database created a moment ago is polled again after ~100 ms, not at once.
    await new Promise((r) => setTimeout(r, 150));
    await converge("copy", 2);
    const copy = api.databases.get(statusOf("copy").id!)!;
    expect(copy.source).toEqual({
      type: "backup",
      databaseId: statusOf("orders").id,
      backupId: "bkp_c000000000000000000000001",
    });
    expect(condition("copy", "Ready")?.status).toBe("True");
  });
});

describe("lookup before create from the remote mirror (throughput)", () => {
  /** Every listDatabases call's parameters: a per-object lookup carries a logicalId, a mirror list does not. */
  function recordLists() {
    const lists: { logicalId?: string | undefined }[] = [];
    const list = api.listDatabases.bind(api);
    api.listDatabases = (params, options) => {
      lists.push(params ?? {});
      return list(params, options);
    };
    return {
      lookups: () => lists.filter((p) => p.logicalId !== undefined).length,
      fullLists: () => lists.filter((p) => p.logicalId === undefined).length,
    };
  }

  it("costs one call per create once the mirror has listed: a burst of 30 creates shares one list and POSTs straight away", async () => {
    const lists = recordLists();
    const names = Array.from({ length: 30 }, (_, i) => `db-${i}`);
    for (const n of names) applyDatabase(n);
    await Promise.all(names.map((n) => run(n)));
    expect(api.calls["createDatabase"]).toBe(30);
    expect(lists.lookups()).toBe(0);
    expect(lists.fullLists()).toBe(1);
    expect(api.databases.size).toBe(30);
    for (const n of names) await converge(n, 3);
    for (const n of names) expect(condition(n, "Ready")?.status).toBe("True");
    expect(api.calls["createDatabase"]).toBe(30);
  });

  it("adopts a database a previous process created (crash after the POST), never duplicating it, with the original credentials", async () => {
    const projectId = [...api.projects.keys()][0]!;
    const logicalId = logicalIdOf("unit", "default", "orders");
    // The predecessor's POST for this very object, exactly as the operator sends it; then it died before writing
    // anything to Kubernetes.
    applyDatabase("orders");
    const earlier = await api.createDatabase(
      { projectId: projectId, name: "orders", region: "inherit", isDefault: false, logicalId },
      { idempotencyKey: incarnationKeyOf(db("orders"), "create-database", logicalId, projectId) },
    );
    await converge("orders");
    expect([...api.databases.keys()]).toEqual([earlier.id]);
    expect(statusOf("orders").id).toBe(earlier.id);
    expect(events.map((e) => e.reason)).toContain("Adopted");
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(earlier.defaultConnectionId!));
    expect(condition("orders", "Ready")?.status).toBe("True");
  });

  it("upgrade: a create the previous release sent (its key had no uid) whose answer was lost is adopted, not made twice", async () => {
    const projectId = [...api.projects.keys()][0]!;
    const logicalId = logicalIdOf("unit", "default", "legacy");
    // The previous release's key: the logicalId and the project only.
    const earlier = await api.createDatabase(
      { projectId: projectId, name: "legacy", region: "inherit", isDefault: false, logicalId },
      { idempotencyKey: idempotencyKeyOf("create-database", logicalId, projectId) },
    );
    applyDatabase("legacy");
    await converge("legacy");
    // Found by its logicalId; the new key replays nothing, so the Secret gets a minted connection and the original
    // one (its password lost with the answer) is revoked.
    expect([...api.databases.keys()]).toEqual([earlier.id]);
    expect(statusOf("legacy").id).toBe(earlier.id);
    const password = decodeData(secret("legacy")!)["PGPASSWORD"];
    expect(password).not.toBe(api.passwords.get(earlier.defaultConnectionId!));
    expect(api.databases.get(earlier.id)!.connections.map((c) => c.id)).not.toContain(earlier.defaultConnectionId);
    expect(condition("legacy", "Ready")?.status).toBe("True");
  });

  it("a database created after the mirror listed (not in it) is not duplicated: the POST with the same Idempotency-Key replays", async () => {
    const lists = recordLists();
    applyDatabase("first");
    await converge("first");
    const projectId = [...api.projects.keys()][0]!;
    const logicalId = logicalIdOf("unit", "default", "late");
    applyDatabase("late");
    const late = await api.createDatabase(
      { projectId: projectId, name: "late", region: "inherit", isDefault: false, logicalId },
      { idempotencyKey: incarnationKeyOf(db("late"), "create-database", logicalId, projectId) },
    );
    await converge("late");
    expect(api.databases.size).toBe(2);
    expect(statusOf("late").id).toBe(late.id);
    expect(decodeData(secret("late")!)["PGPASSWORD"]).toBe(api.passwords.get(late.defaultConnectionId!));
    expect(lists.lookups()).toBe(0);

    // Past the replay window the POST is a 409 on the logicalId: looked up and adopted.
    const lostId = logicalIdOf("unit", "default", "later");
    const later = await api.createDatabase({ projectId: projectId, name: "later", logicalId: lostId });
    api.expireReplays();
    applyDatabase("later");
    await converge("later");
    expect(api.databases.size).toBe(3);
    expect(statusOf("later").id).toBe(later.id);
    expect(condition("later", "Ready")?.status).toBe("True");
  });

  it("replays a POST whose response was lost: one database, the original credentials, no minting", async () => {
    applyDatabase("orders");
    api.loseNextResponse("createDatabase", new FakeApiError("unavailable", 503, "connection reset"));
    expect((await run("orders")).type).toBe("error");
    expect(api.databases.size).toBe(1);
    await converge("orders");
    const d = [...api.databases.values()][0]!;
    expect(api.databases.size).toBe(1);
    expect(statusOf("orders").connection!.id).toBe(d.defaultConnectionId);
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(d.defaultConnectionId));
    expect(api.calls["createConnection"] ?? 0).toBe(0);
  });

  it("adopts its own database when a POST's response was lost and the spec changed before the retry (422 on the key)", async () => {
    applyDatabase("orders");
    api.loseNextResponse("createDatabase", new FakeApiError("unavailable", 503, "connection reset"));
    await run("orders");
    applyDatabase("orders", { projectRef: { name: "shop" }, displayName: "orders-renamed" });
    await converge("orders");
    const [only] = [...api.databases.values()];
    expect(api.databases.size).toBe(1);
    expect(statusOf("orders").id).toBe(only!.id);
    expect(only!.name).toBe("orders-renamed");
    expect(decodeData(secret("orders")!)["PGPASSWORD"]).toBe(api.passwords.get(statusOf("orders").connection!.id));
    expect(condition("orders", "Ready")?.status).toBe("True");
  });

  it("falls back to the per-object lookup when the service does not report logicalId", async () => {
    api.reportsLogicalId = false;
    // A listed database without the field: the mirror cannot tell whose it is.
    await api.createDatabase({ projectId: [...api.projects.keys()][0]!, name: "other" });
    const lists = recordLists();
    applyDatabase("orders");
    await run("orders");
    expect(lists.lookups()).toBe(1);
    expect(api.databases.size).toBe(2);
  });
});

describe("expiry (spec.expireAfter)", () => {
  const created = Date.parse("2026-01-01T00:00:00Z");
  function applyExpiring(name: string, extra: object) {
    kube.put(DatabaseType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name, namespace: "default", creationTimestamp: "2026-01-01T00:00:00Z" },
      spec: { projectRef: { name: "shop" }, expireAfter: "2h", deletionPolicy: "Delete", ...extra },
    });
  }
  const at = (ms: number) => vi.setSystemTime(created + ms);
  const minutes = 60_000;

  it("stores the time, warns once before it, wakes for it, and then deletes the resource and its remote database", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    at(0);
    applyExpiring("preview", {});
    await converge("preview");
    expect(condition("preview", "Ready")?.status).toBe("True");
    expect(statusOf("preview")).toMatchObject({ expiresAt: "2026-01-01T02:00:00Z" });
    // Requeued for the warning (12 min before: a tenth of 2 h), not only at the slow interval.
    at(60 * minutes);
    const outcome = await run("preview");
    expect(outcome.type).toBe("requeueAfter");
    expect((outcome as { ms: number }).ms).toBeLessThanOrEqual(48 * minutes + 1_000);
    expect(events.filter((e) => e.reason === "Expiring")).toEqual([]);

    at(110 * minutes);
    await run("preview");
    await run("preview");
    const warnings = events.filter((e) => e.reason === "Expiring");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ type: "Warning" });
    expect(warnings[0]!.message).toContain("2026-01-01T02:00:00Z");

    at(121 * minutes);
    await run("preview");
    expect(events.some((e) => e.reason === "Expired")).toBe(true);
    expect(db("preview").metadata.deletionTimestamp).toBeDefined();
    await run("preview");
    expect(kube.read(DatabaseType, "default", "preview")).toBeUndefined();
    expect(api.databases.size).toBe(0);
  });

  it("never deletes a protected one: condition Expired=True DeletionProtected and a Warning Event", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    at(0);
    applyExpiring("kept", { deletionProtection: true });
    await converge("kept");
    at(3 * 60 * minutes);
    await run("kept");
    expect(db("kept").metadata.deletionTimestamp).toBeUndefined();
    expect(condition("kept", "Expired")).toMatchObject({ status: "True", reason: "DeletionProtected" });
    expect(events.find((e) => e.reason === "ExpiryBlocked")?.type).toBe("Warning");
    expect(condition("kept", "Ready")?.status).toBe("True");
    expect(api.databases.size).toBe(1);
  });

  it("keeps the stored time across a restart with a skewed clock", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    at(0);
    applyExpiring("skewed", { expiryRenewal: "sha1" });
    await converge("skewed");
    // A new operator whose clock runs 90 minutes ahead reads the stored time; it does not count again.
    at(90 * minutes);
    await run("skewed");
    expect(statusOf("skewed")).toMatchObject({ expiresAt: "2026-01-01T02:00:00Z" });
    expect(db("skewed").metadata.deletionTimestamp).toBeUndefined();
  });

  // A team deletes its expired preview and applies a new one of the same name while the operator acts on the old
  // one: the operator's delete must hit only the object it read (uid precondition), never the new one.
  it("never deletes an object re-created under the same name between the read and the delete", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    at(0);
    applyExpiring("again", {});
    await converge("again");
    const oldUid = db("again").metadata.uid;
    const deleteOf = kube.delete.bind(kube);
    let replaced = false;
    kube.delete = async (type, ns, name, o) => {
      if (!replaced && type.plural === DatabaseType.plural && name === "again") {
        replaced = true;
        kube.objects.delete(`${DatabaseType.plural}|default/again`);
        kube.put(DatabaseType, {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "again", namespace: "default" },
          spec: { projectRef: { name: "shop" } },
        });
      }
      return deleteOf(type, ns, name, o);
    };
    at(121 * minutes);
    await run("again").catch(() => undefined);
    expect(replaced).toBe(true);
    expect(db("again").metadata.uid).not.toBe(oldUid);
    expect(db("again").metadata.deletionTimestamp).toBeUndefined();
  });
});

// status is anyone's who may write the subresource. A team that forges status.branch.id of its own preview Database
// and then deletes it must not make the operator delete another preview branch (another team's, in a project the
// same token serves): only the branch spec.branch names in the Database's own project is deleted.
describe("spec.branch: the branch deleted with the last database", () => {
  it("is the one spec.branch names, never one a forged status.branch.id names", async () => {
    const projectId = (kube.read<KubeObject>(ProjectType, "default", "shop")!["status"] as { id: string }).id;
    await api.createBranch(projectId, { gitName: "main" });
    const theirs = await api.createBranch(projectId, { gitName: "team-a-feature" });
    applyDatabase("preview-b", {
      projectRef: { name: "shop" },
      branch: { gitName: "team-b-feature", role: "preview" },
      deletionPolicy: "Delete",
    });
    await converge("preview-b");
    const ours = (statusOf("preview-b") as { branch?: { id: string } }).branch?.id;
    expect(ours).toBeDefined();
    // The team writes the other branch's id into its Database's status, then deletes the Database.
    const stored = kube.objects.get(`${DatabaseType.plural}|default/preview-b`)!;
    (stored["status"] as { branch: { id: string } }).branch.id = theirs.id;
    await kube.delete(DatabaseType, "default", "preview-b");
    await converge("preview-b");
    expect(kube.read(DatabaseType, "default", "preview-b")).toBeUndefined();
    const left = (await api.listBranches(projectId)).data.map((b) => b.gitName).sort();
    expect(left).toEqual(["main", "team-a-feature"]);
  });
});
