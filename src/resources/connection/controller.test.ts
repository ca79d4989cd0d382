import { pino } from "pino";
import { beforeEach, describe, expect, it } from "vitest";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { encodeData } from "../../operator/secret/render.ts";
import { createCredentialPool } from "../../operator/credentials.ts";
import { reconcileManaged, type LoopDeps } from "../../operator/managed-reconciler.ts";
import { ConnectionType, DatabaseType } from "../types.ts";
import { connectionHandler } from "./controller.ts";
import { isNameOf } from "../../operator/identity.ts";
import { stallingReasons } from "../index.ts";
import { createRemoteMirror } from "../remote/mirror.ts";
import type { MdsRemote } from "../remote/remote-api.ts";
import { acceptedFor } from "../../../test/support/accepted.ts";
let acc: ReturnType<typeof acceptedFor>;

// The Connection kind's refusals happen before any API call: nothing is minted for a namespace the Database does
// not allow, nor by id with the operator's own token.

const poll = { fastMs: 1_000, slowMs: 300_000 };
let kube: FakeKube;
let api: FakeApi;
let dbId: string;
let run: (ns: string, name: string) => ReturnType<typeof reconcileManaged>;

beforeEach(async () => {
  kube = createFakeKube();
  acc = acceptedFor(kube);
  api = createFakeApi();
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "t" }),
  });
  const project = await api.createProject({ name: "p", createDatabase: false });
  dbId = (await api.createDatabase({ projectId: project.id, name: "orders" })).id;
  kube.put(DatabaseType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name: "orders", namespace: "shop" },
    spec: { projectId: project.id },
    status: { id: dbId },
  });
  acc.accept("shop", "orders");
  const logger = pino({ level: "silent" });
  const deps: LoopDeps = {
    kube,
    stalling: new Set(stallingReasons()),
    objects: kube.cache(ConnectionType),
    secrets: kube.cache<Secret>(SecretType),
    events: { record() {} },
    logger,
    pollIntervals: poll,
    crashPoint: () => {},
  };
  const kind = connectionHandler({
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
    instanceId: "unit",
    cache: (k: string) => kube.cache(k === "Database" ? DatabaseType : ConnectionType),
  });
  run = (ns, name) => reconcileManaged(deps, kind, `${ns}/${name}`);
});

const connection = (ns: string, spec: object) =>
  kube.put(ConnectionType, {
    apiVersion: "mds.dev/v1alpha1",
    kind: "Connection",
    metadata: { name: "app", namespace: ns },
    spec,
  });
const synced = (ns: string) =>
  (
    (
      kube.read<KubeObject>(ConnectionType, ns, "app")!["status"] as {
        conditions?: { type: string; reason: string; message: string }[];
      }
    ).conditions ?? []
  ).find((c) => c.type === "Synced");
const calls = () => Object.values(api.calls).reduce((a, b) => a + b, 0);

describe("Connection", () => {
  it("in the Database's namespace: mints its own login and publishes it", async () => {
    connection("shop", {
      databaseRef: { name: "orders" },
      connectionSecret: { name: "app-db" },
      deletionPolicy: "Delete",
    });
    for (let i = 0; i < 3; i++) await run("shop", "app");
    const secret = kube.read<Secret>(SecretType, "shop", "app-db");
    expect(secret?.metadata.labels?.["mds.dev/database-id"]).toBe(dbId);
    expect(api.calls["createConnection"]).toBe(1);
  });

  it("in another namespace: refused before any API call until the Database allows it", async () => {
    connection("apps", { databaseRef: { name: "orders", namespace: "shop" }, deletionPolicy: "Delete" });
    const before = calls();
    await run("apps", "app");
    expect(synced("apps")).toMatchObject({ reason: "ReferenceNotAllowed" });
    expect(synced("apps")?.message).toContain('add "apps" to its spec.connectionPolicy.allowedNamespaces');
    expect(calls()).toBe(before);
    const db = kube.read<KubeObject>(DatabaseType, "shop", "orders")!;
    kube.put(DatabaseType, {
      ...db,
      spec: { ...(db["spec"] as object), connectionPolicy: { allowedNamespaces: ["apps"] } },
    });
    for (let i = 0; i < 3; i++) await run("apps", "app");
    expect(kube.read<Secret>(SecretType, "apps", "app")?.metadata.labels?.["mds.dev/database-id"]).toBe(dbId);
  });

  it("by databaseId: refused without a token of its own namespace, never with the operator's", async () => {
    connection("apps", { databaseId: dbId, deletionPolicy: "Delete" });
    const before = calls();
    await run("apps", "app");
    expect(synced("apps")).toMatchObject({ reason: "InvalidSpec" });
    expect(calls()).toBe(before);
  });
});

describe("the connections a Connection revokes", () => {
  it("are those of its own name and its rotations' names only, never an id it was told", () => {
    const base = "k8s-unit-connection-apps.app";
    expect(isNameOf(base, base)).toBe(true);
    expect(isNameOf(`${base}-rmhx2k1`, base)).toBe(true);
    const long = `k8s-unit-connection-${"n".repeat(40)}.app`.slice(0, 64);
    expect(isNameOf(`${long.slice(0, 64 - 8)}-rmhx2k1`, long)).toBe(true);
    expect(isNameOf("default", base)).toBe(false);
    expect(isNameOf(`${base}x`, base)).toBe(false);
    expect(isNameOf("k8s-unit-database-team-a.orders", base)).toBe(false);
  });
});
