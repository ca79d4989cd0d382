import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type ResourceType, type Secret } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import { reconcileManaged } from "../../operator/managed-reconciler.ts";
import { BackupScheduleType } from "../backup-schedule/schema.ts";
import { databaseHandler } from "./controller.ts";
import { DatabaseType, ProjectType } from "../types.ts";
import { backupAges, backupTracking } from "./latest-backup.ts";
import { forgetLatestBackup } from "../remote/backups.ts";
import { DatabaseBackupType } from "../database-backup/schema.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";
import { createAcceptedIds } from "../../operator/accepted.ts";

// The resync budget: a steady resync of N databases costs about N/100 calls. status.latestBackup is read only for a
// Database with a BackupSchedule or DatabaseBackup, or spec.trackLatestBackup: a plain Database's resyncs never list
// its backups, and it has no backup-age series.

const poll = { fastMs: 1_000, slowMs: 300_000 };
const types: Record<string, ResourceType> = {
  Project: ProjectType,
  Database: DatabaseType,
  DatabaseBackup: DatabaseBackupType,
  BackupSchedule: BackupScheduleType,
};
let kube: FakeKube;
let api: FakeApi;
let resync: (name: string) => Promise<unknown>;
const cache = (k: string) => kube.cache(types[k]!);

beforeEach(async () => {
  kube = createFakeKube();
  api = createFakeApi();
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "tok" }),
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
      fallbackNamespaces: "*",
    },
    instanceId: "unit",
    accepted: createAcceptedIds(),
    cache,
  });
  const deps = {
    kube,
    objects: kube.cache(DatabaseType),
    secrets: kube.cache<Secret>(SecretType),
    events: { record() {} },
    logger,
    pollIntervals: poll,
    crashPoint: () => {},
    stalling: new Set(stallingReasons()),
  };
  resync = (name) => reconcileManaged(deps, kind, `default/${name}`);
  vi.useFakeTimers({ toFake: ["Date"] });
});
afterEach(() => {
  vi.useRealTimers();
});

const apply = (name: string, spec: object = {}) =>
  kube.put(DatabaseType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: "default" },
    spec: { projectRef: { name: "shop" }, ...spec },
  });
const db = (name: string) => kube.read<KubeObject>(DatabaseType, "default", name)!;
const latest = (name: string) => (db(name)["status"] as { latestBackup?: { id: string } }).latestBackup;
/** Resyncs, each a minute (past every provisioning poll) after the last. */
async function resyncs(name: string, n: number) {
  for (let i = 0; i < n; i++) {
    vi.setSystemTime(Date.now() + 61_000);
    await resync(name);
  }
}

describe("status.latestBackup costs calls only for databases with a backup configuration", () => {
  it("a plain Database's steady resyncs never list its backups, and it has no backup-age series", async () => {
    apply("plain");
    await resyncs("plain", 6);
    expect((db("plain")["status"] as { id?: string }).id).toBeDefined();
    await resyncs("plain", 30);
    expect(api.calls["listBackups"] ?? 0).toBe(0);
    expect(latest("plain")).toBeUndefined();
    expect(backupAges(cache("Database").list(), Date.now(), backupTracking(cache))).toEqual([]);
  });

  it("with a BackupSchedule: read once, then only when a backup completes (or hourly); the series exists", async () => {
    apply("scheduled");
    await resyncs("scheduled", 6);
    kube.put(BackupScheduleType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "BackupSchedule",
      metadata: { name: "nightly", namespace: "default" },
      spec: { databaseRef: { name: "scheduled" }, schedule: "@daily", keep: 3 },
    });
    await resyncs("scheduled", 30);
    expect(api.calls["listBackups"]).toBe(1);
    expect(latest("scheduled")?.id).toBe("bkp_c000000000000000000000001");
    // A DatabaseBackup of it completed: the next resync reads again.
    forgetLatestBackup((db("scheduled")["status"] as { id: string }).id);
    await resyncs("scheduled", 1);
    expect(api.calls["listBackups"]).toBe(2);
    await resyncs("scheduled", 60);
    expect(api.calls["listBackups"]).toBe(3);
    expect(backupAges(cache("Database").list(), Date.now(), backupTracking(cache)).map((a) => a.name)).toEqual([
      "scheduled",
    ]);
  });

  it("with spec.trackLatestBackup (the provider's own backups): every 10 minutes at most", async () => {
    apply("watched", { trackLatestBackup: true });
    await resyncs("watched", 6);
    const first = api.calls["listBackups"] ?? 0;
    expect(first).toBeGreaterThanOrEqual(1);
    await resyncs("watched", 30);
    expect((api.calls["listBackups"] ?? 0) - first).toBe(3);
  });
});
