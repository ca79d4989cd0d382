import { pino } from "pino";
import { beforeEach, describe, expect, it } from "vitest";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { restoreKeysOf } from "../../operator/secret/restore-ledger.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import type { Outcome } from "../../operator/outcome.ts";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { DatabaseRestoreType, DatabaseType } from "../types.ts";
import { reconcileOneShot } from "../../operator/one-shot-reconciler.ts";
import { restoreHandler } from "./controller.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";
import { acceptedFor } from "../../../test/support/accepted.ts";
let acc: ReturnType<typeof acceptedFor>;

// Restore at most once per key and target: wiped status, re-applied resource, crash before the POST beyond the
// replay window (OutcomeUnknown, never a second request).

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let clock: number;
let crash: string | undefined;
let reconcile: (key: string) => Promise<Outcome>;
let dbId: string;

beforeEach(async () => {
  kube = createFakeKube();
  acc = acceptedFor(kube);
  api = createFakeApi();
  clock = Date.parse("2026-11-21T10:00:00Z");
  crash = undefined;
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "tok" }),
  });
  await seed();
  const logger = pino({ level: "silent" });
  // A crash point ends the process: the next reconcile runs in a new reconciler that remembers nothing.
  let restart = false;
  const build = () => {
    const kind = restoreHandler({
      kube,
      cache: () => kube.cache(DatabaseType),
      secrets: kube.cache<Secret>(SecretType),
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
});

/** The target database "inv", at the service and in the cluster. */
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
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: "inv",
      namespace: "default",
      labels: { "app.kubernetes.io/managed-by": "mds-operator", "mds.dev/database-id": dbId },
    },
    data: {},
  });
}

const applyRestore = (name: string) =>
  kube.put(DatabaseRestoreType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "DatabaseRestore",
    metadata: { name, namespace: "default" },
    spec: {
      target: { databaseRef: { name: "inv" } },
      source: { databaseRef: { name: "inv" }, latest: true },
      idempotencyKey: "k1",
    },
  });
const restoreStatus = (name: string) =>
  kube.read<KubeObject>(DatabaseRestoreType, "default", name)?.["status"] as Record<string, unknown> | undefined;
async function settle(name: string, rounds = 5) {
  for (let i = 0; i < rounds; i++) await reconcile(`default/${name}`);
}

describe("DatabaseRestore", () => {
  it("resolves latest once, restores, and records the key on the Database and its Secret", async () => {
    applyRestore("r1");
    await settle("r1");
    expect(restoreStatus("r1")).toMatchObject({
      phase: "Succeeded",
      backupId: "bkp_c000000000000000000000001",
      targetDatabaseId: dbId,
    });
    expect(api.calls["restoreDatabase"]).toBe(1);
    const ledger = (
      kube.read<KubeObject>(DatabaseType, "default", "inv")!["status"] as {
        restoreLedger: { key: string; phase: string }[];
      }
    ).restoreLedger;
    expect(ledger.map((e) => [e.key, e.phase])).toEqual([["k1", "Succeeded"]]);
    expect(restoreKeysOf(kube.read<Secret>(SecretType, "default", "inv"))).toEqual(["k1"]);
  });

  it("is Skipped after its status is wiped or it is re-applied", async () => {
    applyRestore("r1");
    await settle("r1");
    const obj = kube.read<KubeObject>(DatabaseRestoreType, "default", "r1")!;
    delete obj["status"];
    kube.objects.delete("databaserestores|default/r1");
    kube.put(DatabaseRestoreType, obj);
    await settle("r1");
    expect(restoreStatus("r1")?.["phase"]).toBe("Skipped");
    applyRestore("r2");
    await settle("r2");
    expect(restoreStatus("r2")?.["phase"]).toBe("Skipped");
    expect(api.calls["restoreDatabase"]).toBe(1);
  });

  it("after a crash with requestedAt set, re-POSTs only while the service can replay; later it is OutcomeUnknown", async () => {
    applyRestore("r1");
    crash = "restore:before-post";
    await settle("r1", 1);
    expect(restoreStatus("r1")).toMatchObject({ phase: "Running" });
    expect(api.calls["restoreDatabase"] ?? 0).toBe(0);
    clock += 25 * 3600_000;
    await settle("r1");
    expect(restoreStatus("r1")).toMatchObject({ phase: "Failed", reason: "OutcomeUnknown" });
    expect(api.calls["restoreDatabase"] ?? 0).toBe(0);
    // Terminal phases never change.
    await settle("r1");
    expect(restoreStatus("r1")?.["phase"]).toBe("Failed");
  });

  it("after a crash right after the POST, the replayed request does not restore twice", async () => {
    applyRestore("r1");
    crash = "restore:after-post";
    await settle("r1", 1);
    await settle("r1");
    expect(restoreStatus("r1")?.["phase"]).toBe("Succeeded");
    // The restarted operator re-POSTs with the same Idempotency-Key to a server that announced replay: replayed.
    expect(api.calls["restoreDatabase"]).toBe(2);
    expect(api.restores).toBe(1);
  });
});

describe("DatabaseRestore against the public API (no Idempotency-Key replay)", () => {
  beforeEach(async () => {
    api = createFakeApi({ publicApi: true });
    await seed();
  });

  it("a restore whose answer was lost is recognised by the target's new source, never sent again", async () => {
    applyRestore("r1");
    api.loseNextResponse("restoreDatabase", new Error("socket hang up"));
    await settle("r1");
    expect(restoreStatus("r1")).toMatchObject({ phase: "Succeeded" });
    expect(api.calls["restoreDatabase"]).toBe(1);
    expect(api.restores).toBe(1);
  });

  it("a lost answer while the target is recovering waits for it, never sending again", async () => {
    api.restoreReads = 2;
    applyRestore("r1");
    api.loseNextResponse("restoreDatabase", new Error("socket hang up"));
    await settle("r1", 8);
    expect(restoreStatus("r1")).toMatchObject({ phase: "Succeeded" });
    expect(api.calls["restoreDatabase"]).toBe(1);
  });

  it("after a crash around the POST with no sign of a restore on the target, it is OutcomeUnknown at once", async () => {
    applyRestore("r1");
    crash = "restore:before-post";
    await settle("r1", 1);
    await settle("r1");
    expect(restoreStatus("r1")).toMatchObject({ phase: "Failed", reason: "OutcomeUnknown" });
    expect(api.calls["restoreDatabase"] ?? 0).toBe(0);
  });

  it("a POST the service refused without acting (429) is sent again", async () => {
    applyRestore("r1");
    api.failNext("restoreDatabase", Object.assign(new Error("slow down"), { code: "rate_limited", status: 429 }));
    await settle("r1");
    expect(restoreStatus("r1")).toMatchObject({ phase: "Succeeded" });
    expect(api.calls["restoreDatabase"]).toBe(2);
    expect(api.restores).toBe(1);
  });
});

describe("DatabaseRestore by databaseId", () => {
  it("is refused before any API call without a token of its own namespace: the operator's token is not lent by id", async () => {
    kube.put(DatabaseRestoreType, {
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseRestore",
      metadata: { name: "foreign", namespace: "default" },
      spec: { target: { databaseId: dbId }, source: { databaseId: dbId, latest: true } },
    });
    const before = Object.values(api.calls).reduce((a, b) => a + b, 0);
    await settle("foreign", 2);
    const synced = (restoreStatus("foreign")?.["conditions"] as { type: string; reason: string }[] | undefined)?.find(
      (c) => c.type === "Synced",
    );
    expect(synced?.reason).toBe("InvalidSpec");
    expect(Object.values(api.calls).reduce((a, b) => a + b, 0)).toBe(before);
    expect(api.restores).toBe(0);
  });
});

describe("DatabaseRestore ledger before the POST", () => {
  it("writes the ledger again before the POST when its first write failed", async () => {
    applyRestore("r1");
    const patch = kube.patch.bind(kube);
    let failOnce = true;
    kube.patch = (async (type, ns, name, body) => {
      if (type.plural === "secrets" && failOnce) {
        failOnce = false;
        throw new Error("the apiserver is unavailable");
      }
      return patch(type, ns, name, body);
    }) as typeof kube.patch;
    const restore = api.restoreDatabase.bind(api);
    const keysAtPost: string[][] = [];
    api.restoreDatabase = (async (...args: Parameters<typeof restore>) => {
      keysAtPost.push(restoreKeysOf(kube.read<Secret>(SecretType, "default", "inv")));
      return restore(...args);
    }) as typeof restore;
    await settle("r1");
    expect(restoreStatus("r1")?.["phase"]).toBe("Succeeded");
    expect(keysAtPost).toEqual([["k1"]]);
  });
});
