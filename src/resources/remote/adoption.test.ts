import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createFakeKube } from "../../../test/support/fake-kube.ts";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { SecretType, type KubeObject } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import { reconcileManaged } from "../../operator/managed-reconciler.ts";
import type { ObjectCache } from "../../operator/controller.ts";
import { managerOtherThan, protectingDatabaseOf, wakeOtherClaimants, type SeenByClaimant } from "./adoption.ts";
import { databaseHandler } from "../database/controller.ts";
import { DatabaseType, ProjectType } from "../types.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "./mirror.ts";
import type { MdsRemote } from "./remote-api.ts";
import { createAcceptedIds } from "../../operator/accepted.ts";
import { readDatabase } from "../database/read.ts";

const isProtected = (db: KubeObject) => readDatabase(db)?.spec.deletionProtection === true;

// Adoption is exclusive: the rule that picks the one manager of a remote id (status.id recorded, then the oldest,
// then namespace/name), and what it means for the loop: a second claimant acts on nothing, even when an older
// operator let both record the id.

const id = "db_abcdefgh12";
function db(
  ns: string,
  name: string,
  created: string,
  more: { spec?: object; status?: object; deleting?: boolean } = {},
): KubeObject {
  return {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: {
      name,
      namespace: ns,
      creationTimestamp: created,
      ...(more.deleting ? { deletionTimestamp: "2026-01-02T00:00:00Z" } : {}),
    },
    spec: { projectId: "proj_abcdefgh12", externalId: id, ...more.spec },
    ...(more.status === undefined ? {} : { status: more.status }),
  } as KubeObject;
}
/** Every claimant's own credentials see the object (a token of the same workspace). */
const seenByAll: SeenByClaimant = () => Promise.resolve(true);
const cacheOf = (...objs: KubeObject[]): ObjectCache => ({
  get: (ns, name) => objs.find((o) => o.metadata.namespace === ns && o.metadata.name === name),
  list: () => objs,
});

describe("who manages a remote id", () => {
  const older = db("a", "older", "2026-01-01T00:00:00Z");
  const younger = db("b", "younger", "2026-01-01T00:00:05Z");

  it("the resource that recorded the id, however young", async () => {
    const recorded = db("z", "recorded", "2026-01-03T00:00:00Z", { status: { id } });
    const all = cacheOf(older, younger, recorded);
    expect(await managerOtherThan(all, recorded, seenByAll)).toBeUndefined();
    expect(await managerOtherThan(all, older, seenByAll)).toBe("z/recorded");
    expect(await managerOtherThan(all, younger, seenByAll)).toBe("z/recorded");
  });

  it("else the oldest, then namespace/name; every claimant agrees, whichever runs first", async () => {
    expect(await managerOtherThan(cacheOf(older, younger), older, seenByAll)).toBeUndefined();
    expect(await managerOtherThan(cacheOf(older, younger), younger, seenByAll)).toBe("a/older");
    const twin = db("a", "alpha", "2026-01-01T00:00:00Z");
    expect(await managerOtherThan(cacheOf(older, twin), older, seenByAll)).toBe("a/alpha");
    expect(await managerOtherThan(cacheOf(older, twin), twin, seenByAll)).toBeUndefined();
  });

  it("with both recorded (an older operator let both adopt): the oldest, so the pair converges to one", async () => {
    const a = db("a", "a", "2026-01-01T00:00:00Z", { status: { id } });
    const b = db("b", "b", "2026-01-01T00:00:01Z", { status: { id } });
    expect(await managerOtherThan(cacheOf(a, b), a, seenByAll)).toBeUndefined();
    expect(await managerOtherThan(cacheOf(a, b), b, seenByAll)).toBe("a/a");
  });

  it("an older claimant that is Stalled without having recorded the id holds nobody back (its token may not even see it)", async () => {
    const stalled = {
      conditions: [
        { type: "Stalled", status: "True", reason: "AdoptionRefused", message: "not found with credentials team-b/…" },
      ],
    };
    const intruder = db("team-b", "squatter", "2026-01-01T00:00:00Z", { status: stalled });
    expect(await managerOtherThan(cacheOf(intruder, younger), younger, seenByAll)).toBeUndefined();
    // Once the younger one recorded the id, the intruder comes second even when it is no longer stalled.
    const recorded = db("b", "younger", "2026-01-01T00:00:05Z", { status: { id } });
    expect(await managerOtherThan(cacheOf(older, recorded), older, seenByAll)).toBe("b/younger");
    // A recorded manager keeps the object while it is stalled for another reason.
    const stuck = db("a", "manager", "2026-01-01T00:00:09Z", { status: { id, ...stalled } });
    expect(await managerOtherThan(cacheOf(stuck, older), older, seenByAll)).toBe("a/manager");
  });

  it("an ObserveOnly resource neither claims nor is refused; a resource being deleted claims until it is gone", async () => {
    const observer = db("a", "observer", "2026-01-01T00:00:00Z", { spec: { managementPolicy: "ObserveOnly" } });
    expect(await managerOtherThan(cacheOf(observer, younger), younger, seenByAll)).toBeUndefined();
    expect(await managerOtherThan(cacheOf(observer, younger), observer, seenByAll)).toBeUndefined();
    const leaving = db("a", "leaving", "2026-01-01T00:00:00Z", { status: { id }, deleting: true });
    expect(await managerOtherThan(cacheOf(leaving, younger), younger, seenByAll)).toBe("a/leaving");
  });

  it("claims of other ids and resources without one do not count; the object given wins over its cached copy", async () => {
    const other = db("a", "other", "2026-01-01T00:00:00Z", { spec: { externalId: "db_zzzzzzzz99" } });
    const fresh = db("b", "fresh", "2026-01-01T00:00:00Z", { spec: { externalId: undefined } });
    expect(await managerOtherThan(cacheOf(other, younger), younger, seenByAll)).toBeUndefined();
    expect(await managerOtherThan(cacheOf(older), fresh, seenByAll)).toBeUndefined();
    // The cache still has the pre-adoption copy; the loop's object has just recorded the id.
    const stale = db("b", "younger", "2026-01-01T00:00:05Z");
    const current = db("b", "younger", "2026-01-01T00:00:05Z", { status: { id } });
    expect(await managerOtherThan(cacheOf(older, stale), current, seenByAll)).toBeUndefined();
  });

  it("a claimant whose own credentials cannot see the object holds nobody back, however old and whatever its status says", async () => {
    // Team B wrote team A's id in the status (and spec) of an older Database of its own; its token sees another workspace.
    const forged = db("team-b", "forger", "2026-01-01T00:00:00Z", {
      spec: { deletionProtection: true },
      status: { id },
    });
    const seenOutsideTeamB: SeenByClaimant = (claimant) => Promise.resolve(claimant.metadata.namespace !== "team-b");
    expect(await managerOtherThan(cacheOf(forged, younger), younger, seenOutsideTeamB)).toBeUndefined();
    expect(await managerOtherThan(cacheOf(forged, older, younger), younger, seenOutsideTeamB)).toBe("a/older");
    expect(await protectingDatabaseOf(cacheOf(forged), id, seenOutsideTeamB, isProtected)).toBeUndefined();
    const guard = db("a", "guard", "2026-01-01T00:00:09Z", { spec: { deletionProtection: true }, status: { id } });
    expect(await protectingDatabaseOf(cacheOf(forged, guard), id, seenOutsideTeamB, isProtected)).toBe("a/guard");
  });

  it("a change of one claimant wakes the others of its id, including when it stops claiming", () => {
    const wake = wakeOtherClaimants("Database");
    const unrelated = db("c", "unrelated", "2026-01-01T00:00:00Z", { spec: { externalId: "db_zzzzzzzz99" } });
    expect(wake.keys(older, cacheOf(older, younger, unrelated))).toEqual(["b/younger"]);
    const observing = db("a", "older", "2026-01-01T00:00:00Z", { spec: { managementPolicy: "ObserveOnly" } });
    expect(wake.keys(observing, cacheOf(observing, younger))).toEqual(["b/younger"]);
  });

  it("a project's deletion waits for a protected Database that manages one of its databases, not one being deleted", async () => {
    const guard = db("a", "guard", "2026-01-01T00:00:00Z", { spec: { deletionProtection: true }, status: { id } });
    const unprotected = db("a", "plain", "2026-01-01T00:00:00Z", { status: { id } });
    const pending = db("a", "pending", "2026-01-01T00:00:00Z", { spec: { deletionProtection: true } });
    const going = db("a", "going", "2026-01-01T00:00:00Z", {
      spec: { deletionProtection: true },
      status: { id },
      deleting: true,
    });
    expect(await protectingDatabaseOf(cacheOf(unprotected, pending, going, guard), id, seenByAll, isProtected)).toBe(
      "a/guard",
    );
    // An adoption never accepted (no status.id) protects nothing: it names an id, it does not hold it.
    expect(
      await protectingDatabaseOf(cacheOf(unprotected, pending, going), id, seenByAll, isProtected),
    ).toBeUndefined();
  });
});

describe.each([false, true])("the loop with a second claimant (public API: %s)", (publicApi) => {
  it("refuses it before any write or mint, and its Delete deletes nothing, even when both recorded the id", async () => {
    const kube = createFakeKube();
    const api = createFakeApi({ publicApi });
    const events: { reason: string; message: string }[] = [];
    const logger = pino({ level: "silent" });
    const poll = { fastMs: 1_000, slowMs: 300_000 };
    kube.put(SecretType, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "mds-credentials", namespace: "ops" },
      data: encodeData({ token: "t0ken" }),
    });
    const pool = createCredentialPool<MdsRemote>({
      createMirror: createRemoteMirror,
      kube,
      apiUrl: "http://api.invalid",
      createApiClient: () => api,
      logger,
      pollIntervals: poll,
      onRemoteChange: () => {},
    });
    const kind = databaseHandler({
      pool,
      defaultCredentials: {
        secretNamespace: "ops",
        secretName: "mds-credentials",
        key: "token",
        fallbackNamespaces: "*" as const,
      },
      instanceId: "unit",
      accepted: createAcceptedIds(),
      cache: (k) => kube.cache(k === "Project" ? ProjectType : DatabaseType),
    });
    const deps = {
      kube,
      stalling: new Set(stallingReasons()),
      secrets: kube.cache(SecretType),
      events: {
        record: (_o: unknown, _t: string, reason: string, message: string) => events.push({ reason, message }),
      },
      logger,
      pollIntervals: poll,
      crashPoint: () => {},
      objects: kube.cache(DatabaseType),
    };
    const run = (ns: string, name: string) => reconcileManaged(deps, kind, `${ns}/${name}`);

    const project = await api.createProject({ name: "shop", createDatabase: false });
    const remote = await api.createDatabase({ projectId: project.id, name: "orders" });
    const spec = (extra: object) => ({ projectId: project.id, externalId: remote.id, ...extra });
    kube.put(DatabaseType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "first", namespace: "a" },
      spec: spec({ deletionProtection: true }),
    });
    for (let i = 0; i < 3; i++) await run("a", "first");
    const firstStatus = kube.read<KubeObject>(DatabaseType, "a", "first")?.["status"] as { id?: string };
    expect(firstStatus.id).toBe(remote.id);
    const connections = (await api.getDatabase(remote.id)).connections.map((c) => c.id);

    // An older operator let a second one adopt as well: status.id recorded, a finalizer, deletionPolicy Delete.
    await new Promise((r) => setTimeout(r, 5));
    kube.put(DatabaseType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "second", namespace: "b", finalizers: ["mds.dev/finalizer"] },
      spec: spec({ deletionPolicy: "Delete", displayName: "hijacked" }),
      status: { id: remote.id },
    });
    const outcome = await run("b", "second");
    expect(outcome.type).toBe("error");
    const conditions = (
      kube.read<KubeObject>(DatabaseType, "b", "second")?.["status"] as {
        conditions: { type: string; status: string; reason: string; message: string }[];
      }
    ).conditions;
    expect(conditions.find((c) => c.type === "Stalled")).toMatchObject({ status: "True", reason: "AdoptionConflict" });
    expect(conditions.find((c) => c.type === "Stalled")?.message).toContain(
      'Database "a/first" already manages the remote database',
    );
    expect((await api.getDatabase(remote.id)).name).toBe("orders");
    expect((await api.getDatabase(remote.id)).connections.map((c) => c.id)).toEqual(connections);

    await kube.delete(DatabaseType, "b", "second");
    await run("b", "second");
    expect(kube.read(DatabaseType, "b", "second")).toBeUndefined();
    expect(api.databases.has(remote.id)).toBe(true);
    expect(events.find((e) => e.reason === "Retained")?.message).toContain('Database "a/first" manages it');
    expect(api.calls["deleteDatabase"] ?? 0).toBe(0);
  });
});
