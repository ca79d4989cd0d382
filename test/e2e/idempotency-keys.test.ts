import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject } from "../../src/kube/types.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { startKeyRecorder, type KeyRecorder } from "../support/key-recorder.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Every Idempotency-Key the operator sends, seen on the wire: one incarnation of every kind that POSTs (a
// Project with its default database, Databases on a production and a preview branch, a Connection, a rotation, a
// lost Secret recovered, a DatabaseBackup and a DatabaseRestore), all deleted, then the same names applied again.
// No key of the second incarnation is one of the first's, so within the service's 24 h replay window nothing of a
// deleted object can be replayed to its successor. (The user-given keys that span re-creation on purpose,
// DatabaseRestore's and DatabaseBackup's spec.idempotencyKey, name the target's remote id too, and a re-created
// target has a new one; test/architecture/idempotency-keys.test.ts lists every place a key is made.)

let stack: Stack;
let recorder: KeyRecorder;

const ns = () => stack.namespace;
const objects = (withBackups: boolean) => [
  {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "keys", namespace: ns() },
    spec: { region: "us-east-1", deletionPolicy: "Delete", connectionSecret: { name: "keys-default" } },
  },
  {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name: "main", namespace: ns() },
    spec: {
      projectRef: { name: "keys" },
      branch: { gitName: "main", role: "production" },
      deletionPolicy: "Delete",
      connectionSecret: { name: "main", rotation: { every: "2s", gracePeriod: "1s" } },
    },
  },
  {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name: "pr", namespace: ns() },
    spec: { projectRef: { name: "keys" }, branch: { gitName: "feature/keys" }, deletionPolicy: "Delete" },
  },
  {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Connection",
    metadata: { name: "reader", namespace: ns() },
    spec: { databaseRef: { name: "pr" } },
  },
  ...(withBackups
    ? [
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "DatabaseBackup",
          metadata: { name: "nightly", namespace: ns() },
          spec: { databaseRef: { name: "pr" } },
        },
      ]
    : []),
];
const restore = () => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "DatabaseRestore",
  metadata: { name: "undo", namespace: ns() },
  spec: { target: { databaseRef: { name: "pr" } }, source: { databaseRef: { name: "pr" }, latest: true } },
});

const get = async (plural: string, kind: string, name: string) =>
  stack.kube.get<KubeObject>({ ...DatabaseType, plural, kind }, ns(), name);
const statusOf = async (plural: string, kind: string, name: string) =>
  (await get(plural, kind, name))?.["status"] as
    | { conditions?: { type: string; status: string }[]; phase?: string; rotation?: { lastRotationTime?: string } }
    | undefined;
const ready = (plural: string, kind: string, name: string) =>
  eventually(
    async () => {
      const s = await statusOf(plural, kind, name);
      if (!s?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) throw new Error(`${name} not ready`);
      return s;
    },
    { what: `${kind} ${name} Ready`, timeoutMs: 120_000 },
  );
const phase = (plural: string, kind: string, name: string, want: string) =>
  eventually(
    async () => {
      const s = await statusOf(plural, kind, name);
      if (s?.phase !== want) throw new Error(`${name}: ${s?.phase}`);
    },
    { what: `${kind} ${name} ${want}`, timeoutMs: 120_000 },
  );

/** One incarnation: everything applied and driven through each POST the operator makes for it. */
async function incarnation(withBackups: boolean): Promise<void> {
  await stack.kubectl(["apply", "-f", "-"], manifests(...objects(withBackups)));
  await ready("projects", "Project", "keys");
  await ready("databases", "Database", "main");
  await ready("databases", "Database", "pr");
  const reader = await ready("connections", "Connection", "reader");
  expect(reader).toBeDefined();
  // A lost Secret: recovered by a replay (our service) or a mint (the public API).
  await stack.kube.delete(SecretType, ns(), "reader");
  await eventually(
    async () => {
      if ((await stack.kube.get(SecretType, ns(), "reader")) === undefined) throw new Error("not recovered");
    },
    { what: "reader's Secret recovered" },
  );
  await eventually(
    async () => {
      if ((await statusOf("databases", "Database", "main"))?.rotation?.lastRotationTime === undefined)
        throw new Error("not rotated yet");
    },
    { what: "main rotated" },
  );
  if (withBackups) {
    await phase("databasebackups", "DatabaseBackup", "nightly", "Succeeded");
    await stack.kubectl(["apply", "-f", "-"], manifests(restore()));
    await phase("databaserestores", "DatabaseRestore", "undo", "Succeeded");
  }
}

async function deleteAll(withBackups: boolean): Promise<void> {
  const names = [
    ...(withBackups ? ["databaserestores.mds.dev/undo", "databasebackups.mds.dev/nightly"] : []),
    "connections.mds.dev/reader",
    "databases.mds.dev/pr",
    "databases.mds.dev/main",
    "projects.mds.dev/keys",
  ];
  await stack.kubectl(["delete", ...names, "--wait=false"]);
  await eventually(
    async () => {
      const left = await stack.kubectl(["get", ...names, "--ignore-not-found", "-o", "name"]);
      if (left.trim() !== "") throw new Error(`still there: ${left.trim()}`);
    },
    { what: "everything deleted", timeoutMs: 120_000 },
  );
}

describe.each(counterparts)("against %s", (counterpart) => {
  // The public API has no backup endpoint (DatabaseBackup is NotSupported, no POST), so no backup to restore either.
  const withBackups = counterpart === "service";
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    recorder = await startKeyRecorder(stack.emulator?.url ?? stack.service.url);
    await stack.startOperator({ apiUrl: recorder.url });
  }, 120_000);
  afterAll(async () => {
    await recorder?.stop();
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("no key of a re-applied object is one a deleted object sent", async () => {
    recorder.setPhase("first");
    await incarnation(withBackups);
    recorder.setPhase("deleting");
    await deleteAll(withBackups);
    recorder.setPhase("second");
    await incarnation(withBackups);

    const routes = [
      "POST /v1/projects",
      "POST /v1/databases",
      "POST /v1/projects/:id/branches",
      "POST /v1/databases/:id/connections",
      ...(withBackups ? ["POST /v1/databases/:id/backups", "POST /v1/databases/:id/restore"] : []),
    ];
    const first = recorder.sent.filter((k) => k.phase === "first");
    const second = recorder.sent.filter((k) => k.phase === "second");
    // Every kind of POST the operator makes was made in both incarnations, and nothing else carried a key.
    expect(new Set(first.map((k) => k.route))).toEqual(new Set(routes));
    expect(new Set(second.map((k) => k.route))).toEqual(new Set(routes));
    const firstKeys = new Set(first.map((k) => k.key));
    expect(second.filter((k) => firstKeys.has(k.key))).toEqual([]);
  }, 600_000);
});
