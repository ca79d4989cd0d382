import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { createFakeKube } from "../../test/support/fake-kube.ts";
import { chooseCredentials, createCredentialPool, type OperatorCredentials } from "./credentials.ts";
import { createCredentialsGuard, credentialsFinalizer, credentialsLabel } from "./credentials-guard.ts";
import { WaitingError } from "./errors.ts";
import { createMetricsRegistry, operatorMetrics, reportApiContexts } from "./metrics.ts";
import { createRemoteMirror } from "../resources/remote/mirror.ts";
import type { MdsRemote } from "../resources/remote/remote-api.ts";

// Which token a resource acts with (spec, its namespace's mds-credentials, the operator's where allowed), and the
// finalizer that keeps a team's credentials Secret while resources need it.

const operator: OperatorCredentials = { secretNamespace: "mds-system", secretName: "mds-credentials", key: "token" };
const secret = (namespace: string, name: string, token = "t0ken-0123456789"): Secret => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace },
  stringData: { token },
});

function setup() {
  const kube = createFakeKube();
  const pool = createCredentialPool<MdsRemote>({
    createMirror: createRemoteMirror,
    kube,
    apiUrl: "http://api.invalid",
    createApiClient: () => ({}) as never,
    logger: pino({ level: "silent" }),
    pollIntervals: { fastMs: 1000, slowMs: 60_000 },
    onRemoteChange: () => {},
  });
  return { kube, pool };
}

describe("chooseCredentials", () => {
  it("takes spec.credentials, else the namespace's own mds-credentials, else the operator's only where allowed", async () => {
    const { kube, pool } = setup();
    kube.put(SecretType, secret("team-a", "mds-credentials"));
    expect(await chooseCredentials(pool, operator, "team-a", { name: "ci-token" })).toEqual({
      ref: { namespace: "team-a", name: "ci-token", key: "token" },
      source: "spec",
    });
    expect(await chooseCredentials(pool, operator, "team-a", undefined)).toEqual({
      ref: { namespace: "team-a", name: "mds-credentials", key: "token" },
      source: "namespace",
    });
    expect((await chooseCredentials(pool, operator, "mds-system", undefined)).source).toBe("operator");
    // Another namespace never borrows the operator's token by default...
    const refused = await chooseCredentials(pool, operator, "team-b", undefined).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WaitingError);
    expect((refused as WaitingError).reason).toBe("CredentialsMissing");
    expect((refused as Error).message).toContain('create Secret "team-b/mds-credentials"');
    // ...only where the operator's setting lists it, or "*".
    expect(
      (await chooseCredentials(pool, { ...operator, fallbackNamespaces: ["team-b"] }, "team-b", undefined)).source,
    ).toBe("operator");
    expect((await chooseCredentials(pool, { ...operator, fallbackNamespaces: "*" }, "team-z", undefined)).ref).toEqual({
      namespace: "mds-system",
      name: "mds-credentials",
      key: "token",
    });
  });
});

describe("credentials guard", () => {
  it("adds the finalizer once, keeps it while a resource depends on the Secret, and releases it after", async () => {
    const { kube } = setup();
    kube.put(SecretType, secret("team-a", "mds-credentials"));
    kube.put(SecretType, secret("team-a", "old-token"));
    const dependents: KubeObject[] = [];
    const guard = createCredentialsGuard({
      kube,
      dependents: () => dependents,
      namespaces: [undefined],
      logger: pino({ level: "silent" }),
    });
    const guarded = createCredentialPool<MdsRemote>({
      createMirror: createRemoteMirror,
      kube,
      apiUrl: "x",
      createApiClient: () => ({ replaysIdempotencyKeys: () => true }) as never,
      logger: pino({ level: "silent" }),
      pollIntervals: { fastMs: 1000, slowMs: 60_000 },
      onRemoteChange: () => {},
      protect: (s) => guard.protect(s),
    });
    for (const name of ["mds-credentials", "old-token"]) {
      const ref = { namespace: "team-a", name, key: "token" };
      await guarded.resolve(ref).catch(() => undefined);
      // Edited after its token was read (a stale resourceVersion): guarded from the live copy all the same.
      if (name === "old-token")
        kube.put(SecretType, {
          ...kube.read<Secret>(SecretType, "team-a", name)!,
          stringData: { token: "n3w-t0ken-0123456789" },
        });
      await guarded.guard(ref);
      await guarded.guard(ref);
    }
    const read = (name: string) => kube.read<Secret>(SecretType, "team-a", name)!;
    expect(read("mds-credentials").metadata.finalizers).toEqual([credentialsFinalizer]);
    expect(read("mds-credentials").metadata.labels?.[credentialsLabel]).toBe("true");
    expect(kube.writes.filter((w) => w.verb === "patch" && w.name === "mds-credentials")).toHaveLength(1);

    // A resource names the namespace's Secret; one of the namespace has not said yet: nothing is released.
    dependents.push({
      metadata: { name: "db", namespace: "team-a" },
      status: { credentials: { secret: "team-a/mds-credentials" } },
    } as KubeObject);
    dependents.push({ metadata: { name: "new", namespace: "team-a" } } as KubeObject);
    await guard.sweep();
    expect(read("old-token").metadata.finalizers).toEqual([credentialsFinalizer]);
    // Once every resource has said which Secret it uses, the unused one is released; the used one stays.
    dependents.pop();
    await guard.sweep();
    expect(read("old-token").metadata.finalizers ?? []).toEqual([]);
    expect(read("old-token").metadata.labels?.[credentialsLabel]).toBeUndefined();
    expect(read("mds-credentials").metadata.finalizers).toEqual([credentialsFinalizer]);
    // The last dependent gone: released, and a Secret being deleted then goes.
    await kube.delete(SecretType, "team-a", "mds-credentials");
    expect(read("mds-credentials").metadata.deletionTimestamp).toBeDefined();
    dependents.pop();
    await guard.release("team-a", "mds-credentials");
    expect(kube.read(SecretType, "team-a", "mds-credentials")).toBeUndefined();
  });

  it("is held only by resources of the Secret's own namespace: another namespace naming it (status or spec) does not keep it", async () => {
    const { kube } = setup();
    const guardedSecret = (namespace: string, name: string): Secret => ({
      ...secret(namespace, name),
      metadata: { name, namespace, finalizers: [credentialsFinalizer], labels: { [credentialsLabel]: "true" } },
    });
    kube.put(SecretType, guardedSecret("team-a", "mds-credentials"));
    kube.put(SecretType, guardedSecret("team-a", "ci-token"));
    const dependents: KubeObject[] = [];
    const guard = createCredentialsGuard({
      kube,
      dependents: () => dependents,
      namespaces: [undefined],
      logger: pino({ level: "silent" }),
    });
    const read = (name: string) => kube.read<Secret>(SecretType, "team-a", name)!;

    // Team B's resources act with team A's Secrets (a Connection with its Database's token): status names them by
    // "<namespace>/<name>", a spec names a Secret of the same name (its own namespace's), one has not said yet.
    dependents.push({
      metadata: { name: "conn", namespace: "team-b" },
      status: { credentials: { secret: "team-a/mds-credentials" } },
    } as KubeObject);
    dependents.push({
      metadata: { name: "db", namespace: "team-b" },
      spec: { credentials: { secretRef: { name: "ci-token" } } },
      status: { credentials: { secret: "team-a/ci-token" } },
    } as KubeObject);
    dependents.push({ metadata: { name: "new", namespace: "team-b" } } as KubeObject);
    await guard.release("team-a", "mds-credentials");
    expect(read("mds-credentials").metadata.finalizers ?? []).toEqual([]);
    expect(read("mds-credentials").metadata.labels?.[credentialsLabel]).toBeUndefined();
    await guard.sweep();
    expect(read("ci-token").metadata.finalizers ?? []).toEqual([]);
    expect(read("ci-token").metadata.labels?.[credentialsLabel]).toBeUndefined();

    // A resource of team A's namespace that acts with one of them does keep it, through release and sweep.
    kube.put(SecretType, guardedSecret("team-a", "mds-credentials"));
    kube.put(SecretType, guardedSecret("team-a", "ci-token"));
    dependents.push({
      metadata: { name: "db", namespace: "team-a" },
      spec: { credentials: { secretRef: { name: "ci-token" } } },
      status: { credentials: { secret: "team-a/ci-token" } },
    } as KubeObject);
    await guard.release("team-a", "ci-token");
    await guard.sweep();
    expect(read("ci-token").metadata.finalizers).toEqual([credentialsFinalizer]);
    // ...and only it: the namespace's default Secret, which no resource of team A uses, is released.
    expect(read("mds-credentials").metadata.finalizers ?? []).toEqual([]);
  });
});

describe("API contexts: a team's bad tokens cost that team, not the operator", () => {
  const refusal = Object.assign(new Error("unauthorized: invalid, expired or revoked token"), {
    code: "unauthorized",
    status: 401,
  });
  const page = { data: [], pagination: { hasMore: false, nextCursor: null } };
  function world(options: { maxContexts?: number } = {}) {
    const kube = createFakeKube();
    const calls = { clients: 0, garbage: 0, valid: 0 };
    let now = 1_000_000;
    const registry = createMetricsRegistry();
    const pool = createCredentialPool<MdsRemote>({
      createMirror: createRemoteMirror,
      kube,
      apiUrl: "http://api.invalid",
      // The service refuses any token that starts with "garbage" (401), and answers the others.
      createApiClient: ({ token }) => {
        calls.clients++;
        const list = async () => {
          if (token.startsWith("garbage")) {
            calls.garbage++;
            throw refusal;
          }
          calls.valid++;
          return page;
        };
        return { listDatabases: list, listProjects: list, replaysIdempotencyKeys: () => true } as never;
      },
      logger: pino({ level: "silent" }),
      pollIntervals: { fastMs: 1000, slowMs: 60_000 },
      onRemoteChange: () => {},
      tokenTtlMs: 0,
      now: () => now,
      onContexts: reportApiContexts(operatorMetrics(registry)),
      ...options,
    });
    const put = (namespace: string, name: string, token: string) =>
      kube.put(SecretType, secret(namespace, name, token));
    const use = async (namespace: string, name = "mds-credentials") => {
      const ctx = await pool.resolve({ namespace, name, key: "token" });
      await ctx.mirror.ready();
      return ctx;
    };
    const metric = async (name: string) => (await registry.getSingleMetric(name)!.get()).values;
    return { kube, pool, calls, put, use, metric, advance: (ms: number) => (now += ms) };
  }

  it("team B rotating garbage tokens in its mds-credentials never piles up contexts or pollers", async () => {
    const { pool, put, use, calls, advance, metric } = world();
    put("team-a", "mds-credentials", "valid-team-a");
    await use("team-a");
    for (let i = 0; i < 50; i++) {
      put("team-b", "mds-credentials", `garbage-${i}`);
      await expect(use("team-b")).rejects.toMatchObject({ code: "unauthorized" });
      await use("team-a");
      expect(pool.contexts().length).toBeLessThanOrEqual(2);
      advance(1_000);
    }
    // Only team A's context lives on; each garbage token was tried once.
    expect(pool.contexts()).toHaveLength(1);
    expect(calls.garbage).toBe(50);
    expect((await metric("mds_operator_api_contexts"))[0]!.value).toBe(1);
    expect(
      (await metric("mds_operator_api_context_evictions_total")).find((v) => v.labels["reason"] === "refused")?.value,
    ).toBe(50);
    pool.stop();
  });

  it("a refused token is not retried in a hot loop: it waits, doubling per refusal, and a fixed token works at once", async () => {
    const { pool, put, use, calls, advance } = world();
    put("team-b", "mds-credentials", "garbage-looping");
    await expect(use("team-b")).rejects.toMatchObject({ code: "unauthorized" });
    // Team B bumps reconcile-requested-at in a loop: each reconcile is refused by the operator, no API call.
    for (let i = 0; i < 100; i++) {
      const err = await use("team-b").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WaitingError);
      expect((err as WaitingError).reason).toBe("CredentialsInvalid");
      expect((err as Error).message).toMatch(/the API refused the token in Secret "team-b\/mds-credentials"/);
      expect((err as Error).message).not.toContain("garbage-looping");
    }
    expect(calls.garbage).toBe(1);
    expect(pool.contexts()).toHaveLength(0);
    // After the backoff (5 s) one more try, refused again: the next wait is 10 s.
    advance(5_001);
    await expect(use("team-b")).rejects.toMatchObject({ code: "unauthorized" });
    expect(calls.garbage).toBe(2);
    advance(5_001);
    await expect(use("team-b")).rejects.toBeInstanceOf(WaitingError);
    advance(5_000);
    await expect(use("team-b")).rejects.toMatchObject({ code: "unauthorized" });
    expect(calls.garbage).toBe(3);
    // The team puts a valid token in: used at once.
    put("team-b", "mds-credentials", "valid-team-b");
    await use("team-b");
    expect(pool.contexts()).toHaveLength(1);
    pool.stop();
  });

  it("drops a context when it goes idle, when its Secret holds another token, and the least recently used past the bound", async () => {
    const { pool, put, use, advance, metric } = world({ maxContexts: 3 });
    put("team-a", "mds-credentials", "valid-a-1");
    const first = await use("team-a");
    // Rotated: the Secret holds another token, so the old token's context (and its poller) goes.
    put("team-a", "mds-credentials", "valid-a-2");
    const second = await use("team-a");
    expect(second.id).not.toBe(first.id);
    expect(pool.contexts().map((c) => c.id)).toEqual([second.id]);
    // A token shared by two Secrets stays while one of them still holds it.
    put("team-c", "mds-credentials", "valid-a-2");
    await use("team-c");
    put("team-c", "mds-credentials", "valid-c");
    await use("team-c");
    expect(pool.contexts().map((c) => c.id)).toContain(second.id);
    // Bounded: 3 live at most, the least recently used goes.
    for (const ns of ["team-d", "team-e", "team-f"]) {
      put(ns, "mds-credentials", `valid-${ns}`);
      await use(ns);
    }
    expect(pool.contexts()).toHaveLength(3);
    // Idle: nobody resolved them for four settled intervals.
    advance(240_001);
    put("team-g", "mds-credentials", "valid-g");
    await use("team-g");
    expect(pool.contexts()).toHaveLength(1);
    const reasons = Object.fromEntries(
      (await metric("mds_operator_api_context_evictions_total")).map((v) => [v.labels["reason"], v.value]),
    );
    expect(reasons).toEqual({ rotated: 1, capacity: 2, idle: 3 });
    pool.stop();
  });
});
