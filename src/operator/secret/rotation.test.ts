import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createFakeApi, type FakeApi } from "../../../test/support/fake-api.ts";
import { createFakeKube, type FakeKube } from "../../../test/support/fake-kube.ts";
import { SecretType, type KubeObject, type Secret } from "../../kube/types.ts";
import { databaseHandler } from "../../resources/database/controller.ts";
import { DatabaseType, ProjectType } from "../../resources/types.ts";
import { decodeData, encodeData } from "./render.ts";
import { createCredentialPool } from "../credentials.ts";
import { reconcileManaged, type LoopDeps } from "../managed-reconciler.ts";
import { connectionNameOf } from "../identity.ts";
import { parseDuration } from "../duration.ts";
import { rotateAnnotation, rotateForceAnnotation } from "./rotation.ts";
import type { RotationStatus } from "./spec.ts";
import { stallingReasons } from "../../resources/index.ts";
import { createRemoteMirror } from "../../resources/remote/mirror.ts";
import type { MdsRemote } from "../../resources/remote/remote-api.ts";
import { createAcceptedIds } from "../accepted.ts";
import { createConsumerIndex, type ConsumerIndex } from "./consumer-index.ts";
import {
  DeploymentType,
  PodType,
  restartAnnotationOf,
  restartFieldManager,
  templateAnnotationsOf,
} from "./consumers.ts";

// Rotation with overlap through the managed loop (Database kind), against both kinds of server: one that replays
// Idempotency-Keys and the public API, which does not. Time is a fake Date; a crash point throws, as the process would
// die there, and the next reconcile starts from what was written.

const poll = { fastMs: 1_500, slowMs: 300_000 };
type Status = {
  connection?: { id: string };
  rotation?: RotationStatus;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
};

async function setup(publicApi: boolean, consumers?: ConsumerIndex) {
  const kube: FakeKube = createFakeKube();
  const api: FakeApi = createFakeApi({ publicApi });
  const events: string[] = [];
  let crash: string | undefined;
  kube.put(SecretType, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "mds-credentials", namespace: "ops" },
    data: encodeData({ token: "t" }),
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
    apiUrl: "x",
    createApiClient: () => api,
    logger,
    pollIntervals: poll,
    onRemoteChange: () => {},
  });
  const deps: LoopDeps = {
    kube,
    stalling: new Set(stallingReasons()),
    objects: kube.cache(DatabaseType),
    secrets: kube.cache<Secret>(SecretType),
    events: { record: (_o, _t, reason) => events.push(reason) },
    logger,
    pollIntervals: poll,
    consumers,
    crashPoint: (name) => {
      if (name === crash) {
        crash = undefined;
        throw new Error(`simulated crash at ${name}`);
      }
    },
  };
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
    cache: (k: string) => kube.cache(k === "Project" ? ProjectType : DatabaseType),
  });
  const run = () => reconcileManaged(deps, kind, "default/orders");
  const status = () => kube.read<KubeObject>(DatabaseType, "default", "orders")!["status"] as Status;
  const secretConnection = () =>
    kube.read<Secret>(SecretType, "default", "orders")!.metadata.labels!["mds.dev/connection-id"]!;
  const alive = () => [...api.passwords.keys()];
  const advance = async (ms: number, rounds = 3) => {
    for (let i = 0; i < rounds; i++) {
      vi.setSystemTime(Date.now() + ms);
      await run();
    }
  };
  const apply = (connectionSecret: object, annotations: Record<string, string> = {}) => {
    const current = kube.read<KubeObject>(DatabaseType, "default", "orders");
    const obj = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "orders", namespace: "default", annotations },
      spec: { projectRef: { name: "shop" }, connectionSecret },
    };
    if (current === undefined) kube.put(DatabaseType, obj);
    else kube.put(DatabaseType, { ...current, metadata: { ...current.metadata, annotations }, spec: obj.spec });
  };
  return {
    kube,
    api,
    events,
    run,
    status,
    secretConnection,
    alive,
    advance,
    apply,
    crashAt: (name: string) => (crash = name),
  };
}

afterEach(() => vi.useRealTimers());

describe.each([
  ["a server that replays", false],
  ["the public API (no replay)", true],
])("rotation against %s", (_name, publicApi) => {
  it("on demand: publishes a new connection, keeps the old one for the grace period, then revokes it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(publicApi);
    t.apply({ rotation: { gracePeriod: "30s" } });
    await t.advance(1_000, 6);
    const first = t.status().connection!.id;
    t.apply({ rotation: { gracePeriod: "30s" } }, { [rotateAnnotation]: "1" });
    await t.advance(1_000, 2);
    const second = t.status().connection!.id;
    expect(second).not.toBe(first);
    expect(t.secretConnection()).toBe(second);
    expect(decodeData(t.kube.read<Secret>(SecretType, "default", "orders")!)["PGPASSWORD"]).toBe(
      t.api.passwords.get(second),
    );
    expect(t.status().rotation).toMatchObject({ trigger: "1", retiring: { id: first } });
    expect(t.alive()).toEqual(expect.arrayContaining([first, second]));
    // The same annotation value does not rotate again; the grace period ends and the old connection goes.
    await t.advance(31_000, 2);
    expect(t.status().connection!.id).toBe(second);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().rotation?.retiring).toBeUndefined();
    expect(t.events).toEqual(expect.arrayContaining(["SecretRotated", "ConnectionRevoked"]));
  });

  it("a status written by someone else neither mints under another name nor revokes another login", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(publicApi);
    t.apply({ rotation: { gracePeriod: "1s" } });
    await t.advance(1_000, 6);
    const dbId = (t.kube.read<KubeObject>(DatabaseType, "default", "orders")!["status"] as { id: string }).id;
    // Another resource's login on the same database: what "orders" would mint under with the suffix "-billing".
    const victimName = connectionNameOf("unit", "Database", "default", "orders-billing");
    const victim = (await t.api.createConnection(dbId, { name: victimName })).id;
    const current = t.kube.read<KubeObject>(DatabaseType, "default", "orders")!;
    const forged: RotationStatus = {
      pending: { suffix: "-billing", since: new Date().toISOString(), replaces: t.status().connection!.id },
      retiring: { id: victim, name: victimName, revokeAt: "2020-01-01T00:00:00Z" },
    };
    t.kube.put(DatabaseType, { ...current, status: { ...(current["status"] as object), rotation: forged } });
    await t.advance(2_000, 4);
    expect(t.api.passwords.has(victim)).toBe(true);
    const names = (await t.api.getDatabase(dbId)).connections.map((c) => c.name);
    expect(names.filter((n) => n === victimName)).toHaveLength(1);
    expect(t.events).toContain("RevokeRefused");
    expect(t.status().rotation?.retiring).toBeUndefined();
  });

  it("on a schedule, spread by at most 10 %, and never with more than one retiring connection", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(publicApi);
    t.apply({ rotation: { every: "1h", gracePeriod: "2h" } });
    await t.advance(1_000, 6);
    const first = t.status().connection!.id;
    const next = Date.parse(t.status().rotation!.nextRotationTime!);
    expect(next - Date.now()).toBeGreaterThan(0.89 * 3_600_000);
    expect(next - Date.now()).toBeLessThanOrEqual(3_600_000);
    await t.advance(3_600_000, 1);
    const second = t.status().connection!.id;
    expect(second).not.toBe(first);
    // Due again after another hour, but the first connection retires only after two: the rotation waits for it.
    await t.advance(3_600_000, 1);
    expect(t.status().connection!.id).toBe(second);
    await t.advance(3_600_000, 2);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().connection!.id).not.toBe(second);
    expect(t.alive().length).toBe(2); // the retiring one and the current one
  });

  it.each(["database:after-rotate-mint", "database:after-rotate-secret", "database:before-retire"])(
    "survives a crash at %s: the Secret never names a revoked connection, no connection leaks",
    async (point) => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const t = await setup(publicApi);
      t.apply({ rotation: { gracePeriod: "10s" } });
      await t.advance(1_000, 6);
      const first = t.status().connection!.id;
      t.apply({ rotation: { gracePeriod: "10s" } }, { [rotateAnnotation]: "x" });
      t.crashAt(point);
      await t.advance(1_000, 1); // crashes at the mint or the Secret; or rotates
      if (point === "database:before-retire") await t.advance(11_000, 1); // crashes before the revocation
      await t.advance(1_000, 3);
      const current = t.status().connection!.id;
      expect(current).not.toBe(first);
      expect(t.secretConnection()).toBe(current);
      expect(t.api.passwords.has(current)).toBe(true);
      expect(t.status().rotation?.pending).toBeUndefined();
      await t.advance(11_000, 2);
      // The replaced connection is gone after its grace period, and no mint whose answer was lost survives.
      expect(t.alive()).toEqual([current]);
      expect(t.status().conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    },
  );
});

// Rotation that follows its consumers: the index is fed as the operator's informers would (after every write), the
// workloads' rollouts and pods are written by the test, as a kube-controller-manager would.
describe.each([
  ["a server that replays", false],
  ["the public API (no replay)", true],
])("rotation that follows its consumers, against %s", (_name, publicApi) => {
  const deployment = (ns: string, name: string, secret: string): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns },
    spec: {
      replicas: 2,
      template: { spec: { containers: [{ name: "app", envFrom: [{ secretRef: { name: secret } }] }] } },
    },
    status: { observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 },
  });
  const pod = (ns: string, name: string, secret: string, annotations?: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, ...(annotations === undefined ? {} : { annotations }) },
    spec: {
      containers: [
        {
          name: "app",
          env: [{ name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: secret, key: "DATABASE_URL" } } }],
        },
      ],
    },
    status: { phase: "Running" },
  });

  async function setupWithConsumers() {
    const index = createConsumerIndex();
    const t = await setup(publicApi, index);
    const sync = () => {
      for (const type of [DeploymentType, PodType])
        for (const o of t.kube.cache<KubeObject>(type).list()) index.update(type.kind, o, false);
    };
    const step = async (ms: number, rounds = 1) => {
      for (let i = 0; i < rounds; i++) {
        vi.setSystemTime(Date.now() + ms);
        sync();
        await t.run();
        sync();
      }
    };
    /** The controller manager's part: the rollout of the current template done, its pods replaced. */
    const roll = (ns: string, name: string) => {
      const d = t.kube.read<KubeObject>(DeploymentType, ns, name)!;
      const status = {
        observedGeneration: d.metadata.generation,
        replicas: 2,
        updatedReplicas: 2,
        readyReplicas: 2,
        availableReplicas: 2,
      };
      t.kube.put(DeploymentType, { ...d, status });
      index.update("Pod", t.kube.read<KubeObject>(PodType, ns, `${name}-old`)!, true);
      void t.kube.delete(PodType, ns, `${name}-old`);
      t.kube.put(PodType, pod(ns, `${name}-new`, "orders", templateAnnotationsOf(d)));
    };
    const hash = () => t.kube.read<Secret>(SecretType, "default", "orders")!.metadata.annotations!["mds.dev/data-hash"];
    return { ...t, index, sync, step, roll, hash };
  }

  it("Restart rolls the namespace's workloads and revokes the old login only once they rolled and old pods left", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setupWithConsumers();
    const spec = { rotation: { gracePeriod: "10s", consumers: "Restart", consumerTimeout: "5m" } };
    t.apply(spec);
    await t.step(1_000, 6);
    const first = t.status().connection!.id;
    t.kube.put(DeploymentType, deployment("default", "web", "orders"));
    t.kube.put(PodType, pod("default", "web-old", "orders"));
    // The attack: another namespace's workload and pod use a Secret of the same name there.
    t.kube.put(DeploymentType, deployment("other", "web", "orders"));
    t.kube.put(PodType, pod("other", "web-old", "orders"));
    t.apply(spec, { [rotateAnnotation]: "1" });
    await t.step(1_000, 2);
    const second = t.status().connection!.id;
    expect(second).not.toBe(first);
    const web = t.kube.read<KubeObject>(DeploymentType, "default", "web")!;
    expect(templateAnnotationsOf(web)).toEqual({ [restartAnnotationOf("orders")]: t.hash() });
    expect(web.metadata.generation).toBe(2);
    expect(t.kube.writes.filter((w) => w.verb.startsWith("apply"))).toEqual([
      { verb: `apply:${restartFieldManager}`, resource: "deployments", name: "web" },
    ]);
    expect(t.kube.read<KubeObject>(DeploymentType, "other", "web")!.metadata.generation).toBe(1);
    expect(t.events).toContain("ConsumersRestarted");
    // The grace period is over, the rollout is not: the old login stays, status says why.
    await t.step(11_000, 2);
    expect(t.api.passwords.has(first)).toBe(true);
    expect(t.status().rotation?.retiring?.waitingFor).toEqual([
      "Deployment/web: the controller has not seen its new template yet",
      "1 pod started before the rotation (web-old)",
    ]);
    t.roll("default", "web");
    await t.step(1_000, 2);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().rotation?.retiring).toBeUndefined();
    // Another namespace's old pod never held the revocation back, and was never touched.
    expect(t.kube.read<KubeObject>(PodType, "other", "web-old")).toBeDefined();
    // A rotation re-applies nothing once the template carries the hash: one apply in all.
    expect(t.kube.writes.filter((w) => w.verb.startsWith("apply"))).toHaveLength(1);
  });

  it("once the consumers rolled, the old login stays while the API reports open sessions of it (the public API cannot tell)", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setupWithConsumers();
    const spec = { rotation: { gracePeriod: "10s", consumers: "Restart", consumerTimeout: "5m" } };
    t.apply(spec);
    await t.step(1_000, 6);
    const first = t.status().connection!.id;
    t.kube.put(DeploymentType, deployment("default", "web", "orders"));
    t.kube.put(PodType, pod("default", "web-old", "orders"));
    t.apply(spec, { [rotateAnnotation]: "1" });
    await t.step(1_000, 2);
    // An app still holds two sessions with the old login after its pods were replaced (a client outside them).
    t.api.sessions.set(first, 2);
    t.roll("default", "web");
    const reads = () => t.api.calls["getConnection"] ?? 0;
    await t.step(11_000, 1);
    if (publicApi) {
      // No openSessions in the public API's answer: the check is skipped, the login goes as the consumers moved.
      expect(t.api.passwords.has(first)).toBe(false);
      expect(t.status().rotation?.retiring).toBeUndefined();
      return;
    }
    expect(t.api.passwords.has(first)).toBe(true);
    expect(t.status().rotation?.retiring?.waitingFor).toEqual(["2 open sessions of the old login"]);
    // Sessions send no event: the loop comes back on a poll, at least the fast interval, a tenth of the wait so far.
    vi.setSystemTime(Date.now() + 1_000);
    const outcome = await t.run();
    expect(outcome).toEqual({ type: "requeueAfter", ms: poll.fastMs });
    vi.setSystemTime(Date.now() + 60_000);
    const waited = Date.now() - Date.parse(t.status().rotation!.retiring!.revokeAt);
    expect(await t.run()).toEqual({ type: "requeueAfter", ms: Math.round(waited / 10) });
    // Past consumerTimeout: kept, and said as for consumers that did not move.
    const before = reads();
    await t.step(240_000, 1);
    expect(reads()).toBe(before + 1);
    expect(t.api.passwords.has(first)).toBe(true);
    const reconciling = t.status().conditions?.find((c) => c.type === "Reconciling");
    expect(reconciling).toMatchObject({ status: "True", reason: "ConsumersNotRolled" });
    expect(reconciling?.message).toContain("2 open sessions of the old login");
    expect(t.events).toContain("ConsumersNotRolled");
    // A read that fails (the service cannot ask the server) revokes nothing: the step fails, the next one reads again.
    t.api.failNext("getConnection", Object.assign(new Error("unavailable"), { code: "unavailable", status: 503 }));
    t.api.sessions.set(first, 0);
    await t.step(1_000, 1);
    expect(t.api.passwords.has(first)).toBe(true);
    // The app let go: the next read revokes the login.
    await t.step(1_000, 1);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().rotation?.retiring).toBeUndefined();
    expect(t.status().conditions?.find((c) => c.type === "Reconciling")?.status).toBe("False");
  });

  it("asks about the sessions of its own old login only, and never under Ignore", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setupWithConsumers();
    const spec = { rotation: { gracePeriod: "10s", consumers: "Wait", consumerTimeout: "5m" } };
    t.apply(spec);
    await t.step(1_000, 6);
    const databaseId = t.secretConnection() && [...t.api.databases.keys()][0]!;
    // The attack: status (anyone's to write in the namespace) names another team's connection of the same database,
    // whose app holds sessions, so that its count would show up in this resource's status.
    const other = await t.api.createConnection(databaseId, { name: "other-team" });
    t.api.sessions.set(other.id, 3);
    t.kube.put(PodType, pod("default", "web", "orders"));
    const current = t.kube.read<KubeObject>(DatabaseType, "default", "orders")!;
    const past = new Date(Date.now() - 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    t.kube.put(DatabaseType, {
      ...current,
      status: {
        ...(current["status"] as object),
        rotation: { lastRotationTime: past, retiring: { id: other.id, name: "other-team", revokeAt: past } },
      },
    });
    await t.step(1_000, 2);
    expect(t.api.calls["getConnection"] ?? 0).toBe(0);
    expect(JSON.stringify(t.status().rotation ?? {})).not.toContain("session");
    expect(t.api.passwords.has(other.id)).toBe(true);
    expect(t.events).toContain("RevokeRefused");
    // Ignore: today's behaviour exactly, whatever the sessions.
    const ignore = { rotation: { gracePeriod: "10s" } };
    t.apply(ignore);
    await t.step(1_000, 2);
    const first = t.status().connection!.id;
    t.api.sessions.set(first, 1);
    t.apply(ignore, { [rotateAnnotation]: "1" });
    await t.step(1_000, 2);
    await t.step(11_000, 2);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.api.calls["getConnection"] ?? 0).toBe(0);
  });

  it("Wait past consumerTimeout keeps the old login and says so; mds.dev/rotate-force revokes it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setupWithConsumers();
    const spec = { rotation: { gracePeriod: "10s", consumers: "Wait", consumerTimeout: "1m" } };
    t.apply(spec);
    await t.step(1_000, 6);
    const first = t.status().connection!.id;
    t.kube.put(DeploymentType, deployment("default", "web", "orders"));
    t.kube.put(PodType, pod("default", "web-old", "orders"));
    t.apply(spec, { [rotateAnnotation]: "1" });
    await t.step(1_000, 2);
    // Wait rolls nothing.
    expect(t.kube.read<KubeObject>(DeploymentType, "default", "web")!.metadata.generation).toBe(1);
    await t.step(30_000, 1);
    // Within consumerTimeout a wait is no failure: the old login stays, no condition says otherwise yet.
    expect(t.api.passwords.has(first)).toBe(true);
    expect(t.status().conditions?.find((c) => c.type === "Reconciling")?.reason).not.toBe("ConsumersNotRolled");
    expect(t.status().rotation?.retiring?.waitingFor).toEqual(["1 pod started before the rotation (web-old)"]);
    await t.step(31_000, 2);
    expect(t.api.passwords.has(first)).toBe(true);
    const reconciling = t.status().conditions?.find((c) => c.type === "Reconciling") as unknown as {
      status: string;
      reason: string;
      message: string;
    };
    expect(reconciling).toMatchObject({ status: "True", reason: "ConsumersNotRolled" });
    expect(reconciling.message).toContain("web-old");
    expect(t.events).toContain("ConsumersNotRolled");
    t.apply(spec, { [rotateAnnotation]: "1", [rotateForceAnnotation]: "now" });
    await t.step(1_000, 2);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().rotation).toMatchObject({ forced: "now" });
    expect(t.status().rotation?.retiring).toBeUndefined();
    expect(t.events).toContain("RotationForced");
    expect(t.status().conditions?.find((c) => c.type === "Reconciling")?.status).toBe("False");
  });

  it("a rotation begun under Ignore and followed after a spec change still times out", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setupWithConsumers();
    t.apply({ rotation: { gracePeriod: "10s" } });
    await t.step(1_000, 6);
    const first = t.status().connection!.id;
    t.kube.put(PodType, pod("default", "web-old", "orders"));
    t.apply({ rotation: { gracePeriod: "10s" } }, { [rotateAnnotation]: "1" });
    await t.step(1_000, 2);
    expect(t.status().rotation?.retiring).not.toHaveProperty("consumersDeadline");
    t.apply(
      { rotation: { gracePeriod: "10s", consumers: "Wait", consumerTimeout: "1m" } },
      { [rotateAnnotation]: "1" },
    );
    await t.step(10_000, 1);
    expect(t.status().rotation?.retiring?.consumersDeadline).toBeDefined();
    await t.step(60_000, 1);
    expect(t.api.passwords.has(first)).toBe(true);
    expect(t.status().conditions?.find((c) => c.type === "Reconciling")?.reason).toBe("ConsumersNotRolled");
  });

  it.each([
    "database:after-rotate-mint",
    "database:after-rotate-secret",
    "database:after-rotate-restart",
    "database:before-retire",
  ])(
    "survives a crash at %s: the workload is rolled once, the old login goes after it, nothing leaks",
    async (point) => {
      vi.useFakeTimers({ toFake: ["Date"] });
      const t = await setupWithConsumers();
      const spec = { rotation: { gracePeriod: "5s", consumers: "Restart" } };
      t.apply(spec);
      await t.step(1_000, 6);
      const first = t.status().connection!.id;
      t.kube.put(DeploymentType, deployment("default", "web", "orders"));
      t.kube.put(PodType, pod("default", "web-old", "orders"));
      t.apply(spec, { [rotateAnnotation]: "1" });
      t.crashAt(point);
      await t.step(1_000, 3);
      expect(t.kube.read<KubeObject>(DeploymentType, "default", "web")!.metadata.generation).toBe(2);
      expect(t.status().rotation?.retiring?.id).toBe(first);
      await t.step(6_000, 1);
      expect(t.api.passwords.has(first)).toBe(true);
      t.roll("default", "web");
      await t.step(1_000, 3); // a crash before the revocation (before-retire) is followed by a step that revokes
      expect(t.api.passwords.has(first)).toBe(false);
      const current = t.status().connection!.id;
      expect(t.secretConnection()).toBe(current);
      expect(t.alive()).toEqual([current]);
      expect(t.kube.writes.filter((w) => w.verb.startsWith("apply"))).toHaveLength(1);
    },
  );

  it("Restart without --rotation-consumers behaves as Ignore and says so", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(publicApi);
    const spec = { rotation: { gracePeriod: "5s", consumers: "Restart" } };
    t.apply(spec);
    await t.advance(1_000, 6);
    const first = t.status().connection!.id;
    t.apply(spec, { [rotateAnnotation]: "1" });
    await t.advance(1_000, 2);
    expect(t.events).toContain("ConsumersNotFollowed");
    expect(t.status().rotation?.retiring).not.toHaveProperty("consumersDeadline");
    await t.advance(6_000, 2);
    expect(t.api.passwords.has(first)).toBe(false);
  });

  it("a rotation with no consumers costs no more Kubernetes calls or writes than Ignore", async () => {
    const measure = async (consumers: "Restart" | "Ignore", follow: boolean) => {
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(Date.parse("2030-01-01T00:00:00Z"));
      const t = follow ? await setupWithConsumers() : { ...(await setup(publicApi)), step: undefined };
      const step = t.step ?? t.advance;
      const spec = { rotation: { gracePeriod: "5s", consumers } };
      t.apply(spec);
      await step(1_000, 6);
      const gets = vi.spyOn(t.kube, "get");
      const writesBefore = t.kube.writes.length;
      const apiBefore = Object.values(t.api.calls).reduce((a, b) => a + b, 0);
      t.apply(spec, { [rotateAnnotation]: "1" });
      await step(1_000, 2);
      await step(6_000, 2);
      expect(t.status().rotation?.retiring).toBeUndefined();
      const counts = {
        gets: gets.mock.calls.length,
        writes: t.kube.writes.length - writesBefore,
        apiCalls: Object.values(t.api.calls).reduce((a, b) => a + b, 0) - apiBefore,
      };
      vi.useRealTimers();
      return counts;
    };
    const following = await measure("Restart", true);
    expect(following).toEqual(await measure("Ignore", false));
    // What is compared is a real rotation's cost: a mint, a Secret write, a revocation.
    expect(following.apiCalls).toBeGreaterThan(0);
    expect(following.writes).toBeGreaterThan(0);
  });
});

describe("a rotation mint whose answer was lost, then a crash after the Secret", () => {
  it.each([false, true])("revokes the lost mint when it finishes the rotation (public API: %s)", async (publicApi) => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(publicApi);
    t.apply({ rotation: { gracePeriod: "10s" } });
    await t.advance(1_000, 6);
    t.apply({ rotation: { gracePeriod: "10s" } }, { [rotateAnnotation]: "x" });
    // The first mint lands but its answer is lost; the retry mints again, publishes, and dies before revoking the first.
    t.api.loseNextResponse("createConnection", Object.assign(new Error("socket hang up"), { code: "network_error" }));
    await t.advance(1_000, 1);
    t.crashAt("database:after-rotate-secret");
    await t.advance(1_000, 1);
    await t.advance(1_000, 3);
    await t.advance(11_000, 2);
    const current = t.status().connection!.id;
    expect(t.secretConnection()).toBe(current);
    expect(t.alive()).toEqual([current]);
  });
});

describe("rotation after a crash that left status naming an older connection", () => {
  it("mints and publishes anew after a crash at the mint, never mistaking the stale status for a finished rotation", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(false);
    t.apply({ rotation: { gracePeriod: "10s" } });
    await t.advance(1_000, 6);
    const published = t.secretConnection();
    // As if the operator was killed after a Secret rebuild, before status named the new connection.
    const obj = t.kube.read<KubeObject>(DatabaseType, "default", "orders")!;
    t.kube.put(DatabaseType, {
      ...obj,
      status: { ...(obj["status"] as object), connection: { id: "con_stale000000", name: "old" } },
    });
    t.apply({ rotation: { gracePeriod: "10s" } }, { [rotateAnnotation]: "again" });
    t.crashAt("database:after-rotate-mint");
    await t.advance(1_000, 4);
    expect(t.secretConnection()).not.toBe(published);
    expect(t.status().rotation).toMatchObject({ trigger: "again", retiring: { id: published } });
    expect(t.api.passwords.has(t.secretConnection())).toBe(true);
  });
});

describe("a failed revocation of the retiring connection", () => {
  it("keeps it in status.rotation.retiring and revokes it on a later reconcile", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = await setup(false);
    t.apply({ rotation: { gracePeriod: "5s" } });
    await t.advance(1_000, 6);
    const first = t.status().connection!.id;
    t.apply({ rotation: { gracePeriod: "5s" } }, { [rotateAnnotation]: "1" });
    await t.advance(1_000, 2);
    t.api.failNext("deleteConnection", Object.assign(new Error("unavailable"), { code: "unavailable", status: 503 }));
    await t.advance(6_000, 1);
    expect(t.api.passwords.has(first)).toBe(true);
    expect(t.status().rotation?.retiring?.id).toBe(first);
    await t.advance(1_000, 1);
    expect(t.api.passwords.has(first)).toBe(false);
    expect(t.status().rotation?.retiring).toBeUndefined();
  });
});

describe("connection names", () => {
  it("cannot collide across namespaces and names that share dashes", () => {
    expect(connectionNameOf("i", "Connection", "team", "a-db")).not.toBe(
      connectionNameOf("i", "Connection", "team-a", "db"),
    );
  });
});

describe("durations", () => {
  it("reads Kubernetes-style durations and refuses anything else", () => {
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("45s")).toBe(45_000);
    expect(parseDuration("500ms")).toBe(500);
    expect(() => parseDuration("1 day")).toThrow(/not a duration/);
    expect(() => parseDuration("10")).toThrow(/not a duration/);
  });
});
