import { pino } from "pino";
import { beforeEach, describe, expect, it } from "vitest";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { SecretType, type KubeObject } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import type { Outcome } from "../../operator/outcome.ts";
import { reconcileOneShot } from "../../operator/one-shot-reconciler.ts";
import { DatabaseType } from "../types.ts";
import { backupHandler } from "./controller.ts";
import { DatabaseBackupType } from "./schema.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";
import { acceptedFor } from "../../../test/support/accepted.ts";
let acc: ReturnType<typeof acceptedFor>;

// One backup per resource: through a crash before or after the POST, a lost answer, and past the replay window
// (OutcomeUnknown, never a second request); against the public API (no backup endpoint) NotSupported and no POST.

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let clock: number;
let crash: string | undefined;
let reconcile: (key: string) => Promise<Outcome>;
let dbId: string;

function setUp(publicApi: boolean) {
  kube = createFakeKube();
  acc = acceptedFor(kube);
  api = createFakeApi({ publicApi });
  clock = Date.parse("2026-11-21T10:00:00Z");
  crash = undefined;
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "tok" }),
  });
  const logger = pino({ level: "silent" });
  // A crash point ends the process: the next reconcile runs in a new reconciler that remembers nothing.
  let restart = false;
  const build = () => {
    const kind = backupHandler({
      cache: () => kube.cache(DatabaseType),
      pool: createCredentialPool<MdsRemote>({
        createMirror: createRemoteMirror,
        kube,
        apiUrl: "x",
        createApiClient: () => api,
        logger,
        pollIntervals: poll,
        onRemoteChange: () => {},
      }),
      accepted: acc.accepted,
      defaultCredentials: {
        secretNamespace: "ops",
        secretName: "mds-credentials",
        key: "token",
        fallbackNamespaces: "*" as const,
      },
      events: { record() {} },
      pollIntervals: poll,
      crashPoint: (name) => {
        if (name === crash) {
          crash = undefined;
          restart = true;
          throw new Error(`simulated crash at ${name}`);
        }
      },
    });
    return (key: string) =>
      reconcileOneShot(
        { kube, stalling: new Set(stallingReasons()), events: { record() {} }, logger, now: () => new Date(clock) },
        kind,
        key,
      );
  };
  let current = build();
  reconcile = async (key) => {
    const outcome = await current(key);
    if (restart) [current, restart] = [build(), false];
    return outcome;
  };
}

async function seed() {
  const project = await api.createProject({ name: "p", createDatabase: false });
  dbId = (await api.createDatabase({ projectId: project.id, name: "inv" })).id;
  kube.put(DatabaseType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name: "inv", namespace: "default" },
    spec: { projectId: project.id },
    status: { id: dbId, secretName: "inv" },
  });
  acc.accept("default", "inv");
}

const applyBackup = (name: string, spec: Record<string, unknown> = { databaseRef: { name: "inv" } }) =>
  kube.put(DatabaseBackupType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "DatabaseBackup",
    metadata: { name, namespace: "default", uid: `uid-${name}` },
    spec,
  });
type Status = {
  phase?: string;
  reason?: string;
  backupId?: string;
  sizeBytes?: number;
  conditions?: { type: string; status: string; reason: string; message: string }[];
};
const backupStatus = (name: string) =>
  kube.read<KubeObject>(DatabaseBackupType, "default", name)?.["status"] as Status | undefined;
const conditionOf = (name: string, type: string) => backupStatus(name)?.conditions?.find((c) => c.type === type);
async function settle(name: string, rounds = 6) {
  for (let i = 0; i < rounds; i++) await reconcile(`default/${name}`);
}

describe("DatabaseBackup against our service (Idempotency-Key replay)", () => {
  beforeEach(async () => {
    setUp(false);
    await seed();
  });

  it("takes one backup, follows it until completed and records id, size and Ready", async () => {
    api.backupReads = 2;
    applyBackup("b1");
    await settle("b1");
    const taken = api.backups.get(dbId)!;
    expect(taken).toHaveLength(1);
    expect(backupStatus("b1")).toMatchObject({ phase: "Succeeded", backupId: taken[0]!.id, sizeBytes: 4096 });
    expect(conditionOf("b1", "Ready")?.status).toBe("True");
    expect(conditionOf("b1", "Reconciling")?.status).toBe("False");
    expect(api.calls["createBackup"]).toBe(1);
    // Final: nothing more is asked.
    const calls = { ...api.calls };
    await settle("b1");
    expect(api.calls).toEqual(calls);
  });

  it("after a crash before the POST, the restarted operator sends it once", async () => {
    applyBackup("b1");
    crash = "backup:before-post";
    await settle("b1", 1);
    expect(backupStatus("b1")).toMatchObject({ phase: "Running" });
    expect(api.calls["createBackup"] ?? 0).toBe(0);
    await settle("b1");
    expect(backupStatus("b1")?.phase).toBe("Succeeded");
    expect(api.backupsTaken).toBe(1);
  });

  it("after a crash right after the POST, the replayed request does not take a second backup", async () => {
    applyBackup("b1");
    crash = "backup:after-post";
    await settle("b1", 1);
    expect(backupStatus("b1")?.backupId).toBeUndefined();
    await settle("b1");
    expect(backupStatus("b1")).toMatchObject({ phase: "Succeeded", backupId: api.backups.get(dbId)![0]!.id });
    expect(api.calls["createBackup"]).toBe(2);
    expect(api.backupsTaken).toBe(1);
  });

  it("a lost answer is replayed, not taken again", async () => {
    applyBackup("b1");
    api.loseNextResponse("createBackup", new Error("socket hang up"));
    await settle("b1");
    expect(backupStatus("b1")?.phase).toBe("Succeeded");
    expect(api.calls["createBackup"]).toBe(2);
    expect(api.backupsTaken).toBe(1);
  });

  it("past the replay window after a crash, it is OutcomeUnknown and never sent", async () => {
    applyBackup("b1");
    crash = "backup:before-post";
    await settle("b1", 1);
    clock += 25 * 3600_000;
    await settle("b1");
    expect(backupStatus("b1")).toMatchObject({ phase: "Failed", reason: "OutcomeUnknown" });
    expect(conditionOf("b1", "Stalled")?.status).toBe("True");
    expect(api.calls["createBackup"] ?? 0).toBe(0);
  });

  it("two resources with the same idempotencyKey on the same database share one backup", async () => {
    applyBackup("b1", { databaseRef: { name: "inv" }, idempotencyKey: "nightly-1" });
    applyBackup("b2", { databaseRef: { name: "inv" }, idempotencyKey: "nightly-1" });
    await settle("b1");
    await settle("b2");
    expect(backupStatus("b2")?.backupId).toBe(backupStatus("b1")?.backupId);
    expect(api.backupsTaken).toBe(1);
  });

  it("by databaseId without a token of its own namespace: refused before any API call", async () => {
    applyBackup("foreign", { databaseId: dbId });
    const before = Object.values(api.calls).reduce((a, b) => a + b, 0);
    await settle("foreign", 2);
    expect(conditionOf("foreign", "Synced")?.reason).toBe("InvalidSpec");
    expect(Object.values(api.calls).reduce((a, b) => a + b, 0)).toBe(before);
  });
});

describe("DatabaseBackup against the public API (no backup endpoint, no replay)", () => {
  beforeEach(async () => {
    setUp(true);
    await seed();
  });

  it("is Stalled with reason NotSupported, sends no POST and then does nothing at all", async () => {
    applyBackup("b1");
    await settle("b1", 1);
    expect(backupStatus("b1")).toMatchObject({ phase: "Failed", reason: "NotSupported" });
    expect(conditionOf("b1", "Stalled")).toMatchObject({ status: "True", reason: "NotSupported" });
    expect(conditionOf("b1", "Stalled")?.message).toMatch(/does not take backups on request/);
    expect(conditionOf("b1", "Reconciling")?.status).toBe("False");
    expect(api.calls["createBackup"] ?? 0).toBe(0);
    const calls = { ...api.calls };
    await settle("b1", 10);
    expect(api.calls).toEqual(calls);
  });
});
