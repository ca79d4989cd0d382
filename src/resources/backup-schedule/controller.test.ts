import { pino } from "pino";
import { beforeEach, describe, expect, it } from "vitest";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type ResourceType } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import { reconcileOneShot, reconcileRecurring } from "../../operator/one-shot-reconciler.ts";
import type { Outcome } from "../../operator/outcome.ts";
import { DatabaseBackupType } from "../database-backup/schema.ts";
import { DatabaseType } from "../types.ts";
import { scheduleHandler } from "./controller.ts";
import { slotBackupName } from "./operation.ts";
import { BackupScheduleType } from "./schema.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";
import { acceptedFor } from "../../../test/support/accepted.ts";
import { backupHandler } from "../database-backup/controller.ts";
let acc: ReturnType<typeof acceptedFor>;

// A BackupSchedule creates one DatabaseBackup per slot (deterministic name: a restart never doubles a slot), takes
// only the latest slot missed during downtime, prunes only what it took (through its own database at the service),
// and against the public API is NotSupported without creating or sending anything.

const poll = { fastMs: 1_000, slowMs: 300_000 };
const types: Record<string, ResourceType> = {
  Database: DatabaseType,
  DatabaseBackup: DatabaseBackupType,
  BackupSchedule: BackupScheduleType,
};
let kube: FakeKube;
let api: FakeApi;
let clock: number;
let reconcile: (key: string) => Promise<Outcome>;
let dbId: string;

function setUp(publicApi: boolean) {
  kube = createFakeKube();
  acc = acceptedFor(kube);
  api = createFakeApi({ publicApi });
  clock = Date.parse("2026-11-26T10:00:00Z");
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "tok" }),
  });
  const logger = pino({ level: "silent" });
  // A new kind per call: nothing is remembered between reconciles but what is in Kubernetes (a restart each time).
  reconcile = (key) => {
    const kind = scheduleHandler({
      kube,
      cache: (k) => kube.cache(types[k]!),
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
        fallbackNamespaces: "*",
      },
      events: { record() {} },
      pollIntervals: poll,
    });
    return reconcileRecurring(
      { kube, stalling: new Set(stallingReasons()), events: { record() {} }, logger, now: () => new Date(clock) },
      kind,
      key,
    );
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
  kube.put(BackupScheduleType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "BackupSchedule",
    metadata: { name: "nightly", namespace: "default", uid: "uid-nightly", creationTimestamp: "2026-11-26T09:30:00Z" },
    spec: { databaseRef: { name: "inv" }, schedule: "0 * * * *", keep: 2 },
  });
}

const children = () =>
  kube
    .cache(DatabaseBackupType)
    .list()
    .filter((c) => c.metadata.namespace === "default");
const scheduleStatus = () =>
  kube.read<KubeObject>(BackupScheduleType, "default", "nightly")?.["status"] as
    | {
        lastScheduleTime?: string;
        nextScheduleTime?: string;
        kept?: number;
        conditions?: { type: string; status: string; reason: string }[];
      }
    | undefined;
const condition = (type: string) => scheduleStatus()?.conditions?.find((c) => c.type === type);

/** What a DatabaseBackup's own loop would do: take the backup at the fake and mark the resource Succeeded. */
/** The DatabaseBackup loop takes each new child's backup, as the operator runs it (it seals the record). */
async function completeChildren() {
  const logger = pino({ level: "silent" });
  const kind = backupHandler({
    cache: (k) => kube.cache(types[k]!),
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
      fallbackNamespaces: "*",
    },
    events: { record() {} },
    pollIntervals: poll,
    crashPoint: () => {},
  });
  const deps = {
    kube,
    stalling: new Set(stallingReasons()),
    events: { record() {} },
    logger,
    now: () => new Date(clock),
  };
  for (const child of children()) {
    const key = `default/${child.metadata.name}`;
    for (let i = 0; i < 5; i++) {
      const phase = (
        kube.read<KubeObject>(DatabaseBackupType, "default", child.metadata.name)?.["status"] as
          { phase?: string } | undefined
      )?.phase;
      if (phase === "Succeeded" || phase === "Failed") break;
      await reconcileOneShot(deps, kind, key);
    }
  }
}

describe("BackupSchedule against our service", () => {
  beforeEach(async () => {
    setUp(false);
    await seed();
  });

  it("creates one DatabaseBackup per slot, named and keyed by it, owned by the schedule; a restart does not double it", async () => {
    await reconcile("default/nightly");
    expect(children()).toHaveLength(1);
    const slot = Date.parse("2026-11-26T10:00:00Z");
    const [child] = children();
    expect(child!.metadata.name).toBe(slotBackupName("nightly", slot));
    expect(child!["spec"]).toEqual({ databaseRef: { name: "inv" }, idempotencyKey: `uid-nightly/${slot / 60_000}` });
    expect(child!.metadata.ownerReferences).toEqual([
      expect.objectContaining({ uid: "uid-nightly", controller: true }),
    ]);
    expect(scheduleStatus()).toMatchObject({
      lastScheduleTime: "2026-11-26T10:00:00Z",
      nextScheduleTime: "2026-11-26T11:00:00Z",
    });
    expect(condition("Ready")).toMatchObject({ status: "True", reason: "Scheduled" });
    // A wiped status (or a crash before it was written) creates nothing new: the name is taken by the same slot.
    kube.put(BackupScheduleType, { ...kube.read<KubeObject>(BackupScheduleType, "default", "nightly")!, status: {} });
    await reconcile("default/nightly");
    await reconcile("default/nightly");
    expect(children()).toHaveLength(1);
  });

  it("after a downtime that missed five slots, takes only the latest", async () => {
    await reconcile("default/nightly");
    await completeChildren();
    clock = Date.parse("2026-11-26T15:20:00Z");
    await reconcile("default/nightly");
    expect(children().map((c) => c.metadata.name)).toEqual([
      slotBackupName("nightly", Date.parse("2026-11-26T10:00:00Z")),
      slotBackupName("nightly", Date.parse("2026-11-26T15:00:00Z")),
    ]);
  });

  it("keeps the newest `keep` completed backups, deleting older ones at the service and their resources", async () => {
    for (const hour of [10, 11, 12, 13]) {
      clock = Date.parse(`2026-11-26T${hour}:00:30Z`);
      await reconcile("default/nightly");
      await completeChildren();
    }
    await reconcile("default/nightly");
    const names = children().map((c) => c.metadata.name);
    expect(names).toEqual([12, 13].map((h) => slotBackupName("nightly", Date.parse(`2026-11-26T${h}:00:00Z`))));
    expect(api.calls["deleteBackup"]).toBe(2);
    const atService = api.backups.get(dbId)!.map((b) => b.id);
    expect(atService).toHaveLength(2);
    expect(atService.sort()).toEqual(
      children()
        .map((c) => (c["status"] as { backupId: string }).backupId)
        .sort(),
    );
    expect(scheduleStatus()?.kept).toBe(2);
  });

  it("never prunes a backup it did not take: a DatabaseBackup without its ownerReference, even labelled as its own", async () => {
    const mine = await api.createBackup(dbId);
    kube.put(DatabaseBackupType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseBackup",
      metadata: {
        name: "manual",
        namespace: "default",
        labels: { "mds.dev/backup-schedule": "nightly" },
        annotations: { "mds.dev/scheduled-at": "2026-11-20T00:00:00Z" },
      },
      spec: { databaseRef: { name: "inv" } },
      status: { phase: "Succeeded", backupId: mine.id, databaseId: dbId },
    });
    for (const hour of [10, 11, 12]) {
      clock = Date.parse(`2026-11-26T${hour}:00:30Z`);
      await reconcile("default/nightly");
      await completeChildren();
    }
    await reconcile("default/nightly");
    expect(kube.read(DatabaseBackupType, "default", "manual")).toBeDefined();
    expect(api.backups.get(dbId)!.map((b) => b.id)).toContain(mine.id);
  });

  it("never prunes a backup through a forged child: its ownerReference, slot name and key are right, its record is not sealed", async () => {
    const manual = await api.createBackup(dbId);
    // The first slot's child is genuine; its seal is copied onto the forged one, which names the manual backup.
    clock = Date.parse("2026-11-26T10:00:30Z");
    await reconcile("default/nightly");
    await completeChildren();
    const genuine = children()[0]!;
    const slot = Date.parse("2026-11-20T00:00:00Z");
    const seal = (genuine["status"] as { backupSeal?: string }).backupSeal;
    expect(seal).toBeDefined();
    // Two forged children, as the schedule would name and key them for two old slots: one unsealed, one with the
    // genuine child's seal (it seals that child's uid and backup, not these).
    for (const [at, backupSeal] of [
      [slot, undefined],
      [slot + 60_000, seal],
    ] as const) {
      kube.put(DatabaseBackupType, {
        apiVersion: "mds.dev/v1alpha1",
        kind: "DatabaseBackup",
        metadata: {
          name: slotBackupName("nightly", at),
          namespace: "default",
          annotations: { "mds.dev/scheduled-at": new Date(at).toISOString() },
          ownerReferences: [
            {
              apiVersion: "mds.dev/v1alpha1",
              kind: "BackupSchedule",
              name: "nightly",
              uid: "uid-nightly",
              controller: true,
            },
          ],
        },
        spec: { databaseRef: { name: "inv" }, idempotencyKey: `uid-nightly/${at / 60_000}` },
        status: { phase: "Succeeded", backupId: manual.id, databaseId: dbId, ...(backupSeal ? { backupSeal } : {}) },
      });
    }
    for (const hour of [11, 12, 13]) {
      clock = Date.parse(`2026-11-26T${hour}:00:30Z`);
      await reconcile("default/nightly");
      await completeChildren();
    }
    await reconcile("default/nightly");
    expect(api.backups.get(dbId)!.map((b) => b.id)).toContain(manual.id);
    // The genuine ones past keep=2 are pruned as before.
    expect(kube.read(DatabaseBackupType, "default", genuine.metadata.name)).toBeUndefined();
  });

  it("an invalid schedule is InvalidSpec (Stalled) and creates nothing", async () => {
    kube.put(BackupScheduleType, {
      ...kube.read<KubeObject>(BackupScheduleType, "default", "nightly")!,
      spec: { databaseRef: { name: "inv" }, schedule: "0 25 * * *", keep: 1 },
    });
    await reconcile("default/nightly");
    expect(condition("Stalled")).toMatchObject({ status: "True", reason: "InvalidSpec" });
    expect(children()).toHaveLength(0);
  });
});

describe("BackupSchedule against the public API", () => {
  beforeEach(async () => {
    setUp(true);
    await seed();
  });

  it("is Stalled with reason NotSupported, creates no DatabaseBackup and then calls nothing at all", async () => {
    await reconcile("default/nightly");
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "NotSupported" });
    expect(condition("Stalled")).toMatchObject({ status: "True", reason: "NotSupported" });
    expect(children()).toHaveLength(0);
    const calls = { ...api.calls };
    clock += 5 * 3600_000;
    for (let i = 0; i < 5; i++) await reconcile("default/nightly");
    expect(api.calls).toEqual(calls);
    expect(children()).toHaveLength(0);
  });
});
