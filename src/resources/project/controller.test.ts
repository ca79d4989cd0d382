import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { decodeData, encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool, type CredentialPool } from "../../operator/credentials.ts";
import { logicalIdOf } from "../../operator/identity.ts";
import { reconcileManaged, type LoopDeps } from "../../operator/managed-reconciler.ts";
import type { Outcome } from "../../operator/outcome.ts";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { DatabaseType, ProjectType } from "../types.ts";
import { projectHandler } from "./controller.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";

// The Project kind through the generic loop: its default database's Secret, crash recovery by replay, and
// Delete that waits for the project's other databases.

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let crash: string | undefined;
let run: (name: string) => Promise<Outcome>;
let pool: CredentialPool<MdsRemote>;

beforeEach(() => {
  kube = createFakeKube();
  api = createFakeApi();
  crash = undefined;
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "tok" }),
  });
  const logger = pino({ level: "silent" });
  pool = createCredentialPool<MdsRemote>({
    createMirror: createRemoteMirror,
    kube,
    apiUrl: "http://api.invalid",
    createApiClient: () => api,
    logger,
    pollIntervals: poll,
    onRemoteChange: () => {},
  });
  const deps: LoopDeps = {
    kube,
    stalling: new Set(stallingReasons()),
    objects: kube.cache(ProjectType),
    secrets: kube.cache<Secret>(SecretType),
    events: { record() {} },
    logger,
    pollIntervals: poll,
    crashPoint: (name) => {
      if (name === crash) {
        crash = undefined;
        throw new Error(`simulated crash at ${name}`);
      }
    },
  };
  const kind = projectHandler({
    pool,
    defaultCredentials: {
      secretNamespace: "ops",
      secretName: "mds-credentials",
      key: "token",
      fallbackNamespaces: "*" as const,
    },
    instanceId: "unit",
    cache: (kind: string) => kube.cache(kind === "Project" ? ProjectType : DatabaseType),
  });
  run = (name) => reconcileManaged(deps, kind, `default/${name}`);
});

const apply = (name: string, spec: object) =>
  kube.put(ProjectType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name, namespace: "default" },
    spec,
  });
const statusOf = (name: string) =>
  kube.read<KubeObject>(ProjectType, "default", name)?.["status"] as {
    id: string;
    defaultDatabase?: { id: string; status: string };
    conditions: { type: string; status: string; reason: string }[];
  };
// Each round of converge is a requeue: the fast interval passes on a fake clock (only Date is faked).
afterEach(() => {
  vi.useRealTimers();
});
async function converge(name: string, rounds = 6) {
  vi.useFakeTimers({ toFake: ["Date"] });
  for (let i = 0; i < rounds; i++) {
    vi.setSystemTime(Date.now() + poll.fastMs);
    await run(name);
  }
}

describe("Project", () => {
  it("creates the project with its default database and publishes that database's Secret", async () => {
    apply("shop", { region: "us-east-1", connectionSecret: { name: "shop-db" } });
    await converge("shop");
    const s = statusOf("shop");
    expect(s.id).toMatch(/^proj_/);
    expect(s.defaultDatabase?.status).toBe("ready");
    expect(s.conditions.find((c) => c.type === "Ready")).toMatchObject({ status: "True", reason: "Available" });
    const secret = kube.read<Secret>(SecretType, "default", "shop-db")!;
    const db = api.databases.get(s.defaultDatabase!.id)!;
    expect(decodeData(secret)["PGPASSWORD"]).toBe(api.passwords.get(db.defaultConnectionId));
    expect(api.projects.size).toBe(1);
  });

  it("recovers from a crash after the POST by replaying the creation response (no duplicate, same credentials)", async () => {
    apply("shop", { connectionSecret: { name: "shop-db" } });
    crash = "project:after-create";
    await run("shop");
    expect(kube.read(SecretType, "default", "shop-db")).toBeUndefined();
    await converge("shop");
    expect(api.projects.size).toBe(1);
    const db = [...api.databases.values()][0]!;
    expect(decodeData(kube.read<Secret>(SecretType, "default", "shop-db")!)["PGPASSWORD"]).toBe(
      api.passwords.get(db.defaultConnectionId),
    );
    expect(api.calls["createConnection"] ?? 0).toBe(0);
  });

  it("past the replay window, mints a connection for the Secret and revokes the default database's lost one", async () => {
    apply("shop", { connectionSecret: { name: "shop-db" } });
    crash = "project:after-create";
    await run("shop");
    api.expireReplays();
    await converge("shop");
    expect(api.projects.size).toBe(1);
    const db = [...api.databases.values()][0]!;
    expect(api.calls["createConnection"]).toBe(1);
    // The original connection's password was lost with the crash: nobody must hold a working login for it.
    expect(api.passwords.has(db.defaultConnectionId)).toBe(false);
    const password = decodeData(kube.read<Secret>(SecretType, "default", "shop-db")!)["PGPASSWORD"];
    expect([...api.passwords.values()]).toContain(password);
  });

  it("creates with one call once the mirror has listed, and adopts a project a previous process created", async () => {
    apply("fresh", {});
    await run("fresh");
    expect(api.calls["createProject"]).toBe(1);
    // The mirror's full list (no logicalId) proved absence; no per-object lookup.
    expect(api.calls["listProjects"]).toBe(1);

    const earlier = await api.createProject({
      name: "old",
      createDatabase: false,
      logicalId: logicalIdOf("unit", "default", "old"),
    });
    await (await pool.resolve({ namespace: "ops", name: "mds-credentials", key: "token" })).mirror.refresh();
    apply("old", {});
    await converge("old");
    expect(statusOf("old").id).toBe(earlier.id);
    expect(api.projects.size).toBe(2);
  });

  it("with deletionPolicy Delete, waits for the project's other databases, then deletes the default one and the project", async () => {
    apply("temp", { deletionPolicy: "Delete", connectionSecret: { name: "temp-db" } });
    await converge("temp");
    const id = statusOf("temp").id;
    const extra = await api.createDatabase({ projectId: id, name: "extra" });
    await kube.delete(ProjectType, "default", "temp");
    await run("temp");
    expect(statusOf("temp").conditions.find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      reason: "WaitingForDatabases",
    });
    expect(api.projects.has(id)).toBe(true);
    await api.deleteDatabase(extra.id);
    await run("temp");
    expect(kube.read(ProjectType, "default", "temp")).toBeUndefined();
    expect(api.projects.has(id)).toBe(false);
    expect(api.databases.size).toBe(0);
    expect(kube.read(SecretType, "default", "temp-db")).toBeUndefined();
  });
});
