import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createFakeKube } from "../../test/support/fake-kube.ts";
import { createFakeApi } from "../../test/support/fake-api.ts";
import { SecretType, type KubeObject } from "../kube/types.ts";
import { encodeData } from "../operator/connection-secret.ts";
import { createCredentialPool } from "../operator/credentials.ts";
import { reconcileManaged } from "../operator/managed-reconciler.ts";
import type { ObjectCache } from "../operator/kind.ts";
import { managerOtherThan, protectingDatabaseOf, wakeOtherClaimants } from "./adoption.ts";
import { databaseKind } from "./database/controller.ts";
import { DatabaseType, ProjectType } from "./types.ts";

// Adoption is exclusive: the rule that picks the one manager of a remote id (status.id recorded, then the oldest,
// then namespace/name), and what it means for the loop: a second claimant acts on nothing, even when an older
// operator let both record the id.

const id = "db_abcdefgh12";
function db(ns: string, name: string, created: string, more: { spec?: object; status?: object; deleting?: boolean } = {}): KubeObject {
  return {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: ns, creationTimestamp: created, ...(more.deleting ? { deletionTimestamp: "2026-01-02T00:00:00Z" } : {}) },
    spec: { projectId: "proj_abcdefgh12", externalId: id, ...more.spec },
    ...(more.status === undefined ? {} : { status: more.status }),
  } as KubeObject;
}
const cacheOf = (...objs: KubeObject[]): ObjectCache => ({ get: (ns, name) => objs.find((o) => o.metadata.namespace === ns && o.metadata.name === name), list: () => objs });

describe("who manages a remote id", () => {
  const older = db("a", "older", "2026-01-01T00:00:00Z");
  const younger = db("b", "younger", "2026-01-01T00:00:05Z");

  it("the resource that recorded the id, however young", () => {
    const recorded = db("z", "recorded", "2026-01-03T00:00:00Z", { status: { id } });
    const all = cacheOf(older, younger, recorded);
    expect(managerOtherThan(all, recorded)).toBeUndefined();
    expect(managerOtherThan(all, older)).toBe("z/recorded");
    expect(managerOtherThan(all, younger)).toBe("z/recorded");
  });

  it("else the oldest, then namespace/name; every claimant agrees, whichever runs first", () => {
    expect(managerOtherThan(cacheOf(older, younger), older)).toBeUndefined();
    expect(managerOtherThan(cacheOf(older, younger), younger)).toBe("a/older");
    const twin = db("a", "alpha", "2026-01-01T00:00:00Z");
    expect(managerOtherThan(cacheOf(older, twin), older)).toBe("a/alpha");
    expect(managerOtherThan(cacheOf(older, twin), twin)).toBeUndefined();
  });

  it("with both recorded (an older operator let both adopt): the oldest, so the pair converges to one", () => {
    const a = db("a", "a", "2026-01-01T00:00:00Z", { status: { id } });
    const b = db("b", "b", "2026-01-01T00:00:01Z", { status: { id } });
    expect(managerOtherThan(cacheOf(a, b), a)).toBeUndefined();
    expect(managerOtherThan(cacheOf(a, b), b)).toBe("a/a");
  });

  it("an older claimant that is Stalled without having recorded the id holds nobody back (its token may not even see it)", () => {
    const stalled = { conditions: [{ type: "Stalled", status: "True", reason: "AdoptionRefused", message: "not found with credentials team-b/…" }] };
    const intruder = db("team-b", "squatter", "2026-01-01T00:00:00Z", { status: stalled });
    expect(managerOtherThan(cacheOf(intruder, younger), younger)).toBeUndefined();
    // Once the younger one recorded the id, the intruder comes second even when it is no longer stalled.
    const recorded = db("b", "younger", "2026-01-01T00:00:05Z", { status: { id } });
    expect(managerOtherThan(cacheOf(older, recorded), older)).toBe("b/younger");
    // A recorded manager keeps the object while it is stalled for another reason.
    const stuck = db("a", "manager", "2026-01-01T00:00:09Z", { status: { id, ...stalled } });
    expect(managerOtherThan(cacheOf(stuck, older), older)).toBe("a/manager");
  });

  it("an ObserveOnly resource neither claims nor is refused; a resource being deleted claims until it is gone", () => {
    const observer = db("a", "observer", "2026-01-01T00:00:00Z", { spec: { managementPolicy: "ObserveOnly" } });
    expect(managerOtherThan(cacheOf(observer, younger), younger)).toBeUndefined();
    expect(managerOtherThan(cacheOf(observer, younger), observer)).toBeUndefined();
    const leaving = db("a", "leaving", "2026-01-01T00:00:00Z", { status: { id }, deleting: true });
    expect(managerOtherThan(cacheOf(leaving, younger), younger)).toBe("a/leaving");
  });

  it("claims of other ids and resources without one do not count; the object given wins over its cached copy", () => {
    const other = db("a", "other", "2026-01-01T00:00:00Z", { spec: { externalId: "db_zzzzzzzz99" } });
    const fresh = db("b", "fresh", "2026-01-01T00:00:00Z", { spec: { externalId: undefined } });
    expect(managerOtherThan(cacheOf(other, younger), younger)).toBeUndefined();
    expect(managerOtherThan(cacheOf(older), fresh)).toBeUndefined();
    // The cache still has the pre-adoption copy; the loop's object has just recorded the id.
    const stale = db("b", "younger", "2026-01-01T00:00:05Z");
    const current = db("b", "younger", "2026-01-01T00:00:05Z", { status: { id } });
    expect(managerOtherThan(cacheOf(older, stale), current)).toBeUndefined();
  });

  it("a change of one claimant wakes the others of its id, including when it stops claiming", () => {
    const wake = wakeOtherClaimants("Database");
    const unrelated = db("c", "unrelated", "2026-01-01T00:00:00Z", { spec: { externalId: "db_zzzzzzzz99" } });
    expect(wake.keys(older, cacheOf(older, younger, unrelated))).toEqual(["b/younger"]);
    const observing = db("a", "older", "2026-01-01T00:00:00Z", { spec: { managementPolicy: "ObserveOnly" } });
    expect(wake.keys(observing, cacheOf(observing, younger))).toEqual(["b/younger"]);
  });

  it("a project's deletion waits for a protected Database that manages one of its databases, not one being deleted", () => {
    const guard = db("a", "guard", "2026-01-01T00:00:00Z", { spec: { deletionProtection: true }, status: { id } });
    const unprotected = db("a", "plain", "2026-01-01T00:00:00Z", { status: { id } });
    const pending = db("a", "pending", "2026-01-01T00:00:00Z", { spec: { deletionProtection: true } });
    const going = db("a", "going", "2026-01-01T00:00:00Z", { spec: { deletionProtection: true }, status: { id }, deleting: true });
    expect(protectingDatabaseOf(cacheOf(unprotected, pending, going, guard), id)).toBe("a/guard");
    // An adoption never accepted (no status.id) protects nothing: it names an id, it does not hold it.
    expect(protectingDatabaseOf(cacheOf(unprotected, pending, going), id)).toBeUndefined();
  });
});

describe.each([false, true])("the loop with a second claimant (public API: %s)", (publicApi) => {
  it("refuses it before any write or mint, and its Delete deletes nothing, even when both recorded the id", async () => {
    const kube = createFakeKube();
    const api = createFakeApi({ publicApi });
    const events: { reason: string; message: string }[] = [];
    const logger = pino({ level: "silent" });
    const poll = { fastMs: 1_000, slowMs: 300_000 };
    kube.put(SecretType, { apiVersion: "v1", kind: "Secret", metadata: { name: "mds-credentials", namespace: "ops" }, data: encodeData({ token: "t0ken" }) });
    const pool = createCredentialPool({ kube, apiUrl: "http://api.invalid", createApiClient: () => api, logger, pollIntervals: poll, onRemoteChange: () => {} });
    const kind = databaseKind({
      pool,
      defaultCredentials: { secretNamespace: "ops", secretName: "mds-credentials", key: "token", fallbackNamespaces: "*" as const },
      instanceId: "unit",
      cache: (k) => kube.cache(k === "Project" ? ProjectType : DatabaseType),
    });
    const deps = { kube, secrets: kube.cache(SecretType), events: { record: (_o: unknown, _t: string, reason: string, message: string) => events.push({ reason, message }) }, logger, pollIntervals: poll, crashPoint: () => {}, objects: kube.cache(DatabaseType) };
    const run = (ns: string, name: string) => reconcileManaged(deps, kind, `${ns}/${name}`);

    const project = await api.createProject({ name: "shop", createDatabase: false });
    const remote = await api.createDatabase({ projectId: project.id, name: "orders" });
    const spec = (extra: object) => ({ projectId: project.id, externalId: remote.id, ...extra });
    kube.put(DatabaseType, { apiVersion: "mds.dev/v1alpha1", kind: "Database", metadata: { name: "first", namespace: "a" }, spec: spec({ deletionProtection: true }) });
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
    const conditions = (kube.read<KubeObject>(DatabaseType, "b", "second")?.["status"] as { conditions: { type: string; status: string; reason: string; message: string }[] }).conditions;
    expect(conditions.find((c) => c.type === "Stalled")).toMatchObject({ status: "True", reason: "AdoptionConflict" });
    expect(conditions.find((c) => c.type === "Stalled")?.message).toContain('Database "a/first" already manages the remote database');
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
