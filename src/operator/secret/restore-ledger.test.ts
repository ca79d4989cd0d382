import { describe, expect, it } from "vitest";
import { createFakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { annotations, labels } from "./render.ts";
import { databaseSecretOf, recordRestoreKey, restoreKeysOf } from "./restore-ledger.ts";

// The restore ledger's copy on the Secret, as the restore uses it (src/resources/database-restore/ledger.ts).

const secret = (name: string, databaseId: string, extra: Record<string, string> = {}): Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace: "team", labels: { [labels.databaseId]: databaseId }, annotations: extra },
});

describe("restore ledger on the Secret", () => {
  it("records a key once, keeps the other annotations, and keeps the newest 100", async () => {
    const kube = createFakeKube();
    kube.put(SecretType, secret("orders", "db_1", { "team.example/keep": "yes" }));
    await recordRestoreKey(kube, "team", "orders", "k1");
    await recordRestoreKey(kube, "team", "orders", "k1");
    const once = kube.read<Secret>(SecretType, "team", "orders");
    expect(restoreKeysOf(once)).toEqual(["k1"]);
    expect(once?.metadata.annotations?.["team.example/keep"]).toBe("yes");
    for (let i = 2; i <= 101; i++) await recordRestoreKey(kube, "team", "orders", `k${i}`);
    const keys = restoreKeysOf(kube.read<Secret>(SecretType, "team", "orders"));
    expect(keys).toHaveLength(100);
    expect(keys[0]).toBe("k2");
    expect(keys.at(-1)).toBe("k101");
  });

  it("keeps the entries a newer version wrote that it cannot read when it records a key", async () => {
    const kube = createFakeKube();
    const newer = ["k0", { key: "k-newer", verified: true }];
    kube.put(SecretType, secret("orders", "db_1", { [annotations.restores]: JSON.stringify(newer) }));
    await recordRestoreKey(kube, "team", "orders", "k1");
    const written = kube.read<Secret>(SecretType, "team", "orders")?.metadata.annotations?.[annotations.restores];
    expect(JSON.parse(written ?? "[]")).toEqual([...newer, "k1"]);
  });

  it("records nothing on a Secret that is gone, and reads an unreadable annotation as no keys", async () => {
    const kube = createFakeKube();
    await recordRestoreKey(kube, "team", "gone", "k1");
    expect(kube.writes).toEqual([]);
    expect(restoreKeysOf(secret("x", "db_1", { [annotations.restores]: "not json" }))).toEqual([]);
    expect(restoreKeysOf(secret("x", "db_1", { [annotations.restores]: '["a",1,"b"]' }))).toEqual(["a", "b"]);
  });

  it("finds the database's Secret by its owner's name for it, else by the database id it holds", () => {
    const kube = createFakeKube();
    kube.put(SecretType, secret("orders-db", "db_1"));
    kube.put(SecretType, secret("orders", "db_other"));
    kube.put(SecretType, secret("left-behind", "db_2"));
    const cache = kube.cache<Secret>(SecretType);
    const secrets = { get: cache.get, list: (ns?: string) => cache.list().filter((s) => s.metadata.namespace === ns) };
    const owner = (spec: Record<string, unknown>, status?: Record<string, unknown>): KubeObject => ({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "orders", namespace: "team" },
      spec,
      ...(status === undefined ? {} : { status }),
    });
    expect(databaseSecretOf(secrets, "team", owner({}, { secretName: "orders-db" }), "db_1")?.metadata.name).toBe(
      "orders-db",
    );
    expect(databaseSecretOf(secrets, "team", owner({ connectionSecret: { name: "orders-db" } }), "db_1")).toBeDefined();
    // "orders" (the owner's own name) holds another database: not this one's Secret.
    expect(databaseSecretOf(secrets, "team", owner({}), "db_1")?.metadata.name).toBe("orders-db");
    expect(databaseSecretOf(secrets, "team", undefined, "db_2")?.metadata.name).toBe("left-behind");
    expect(databaseSecretOf(secrets, "other", undefined, "db_2")).toBeUndefined();
  });
});
