import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPool } from "../../src/service/store/pool.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";
import { startChaosStack, type ChaosStack } from "../support/chaos/stack.ts";
import { mdsApiVersion } from "../support/chaos/invariants.ts";
import { conditionOf, isReady, type KubeObject } from "../support/kube-objects.ts";
import { eventually } from "../support/eventually.ts";

// A noisy neighbour, end to end: one operator process, the real service with tight limits on failed
// authentication. Team B puts garbage tokens in its Secrets, rotates them and bumps mds.dev/reconcile-requested-at in
// a loop; team A creates a Project and a Database meanwhile. Team A must get Ready with the service never answering
// 429 (before the fix, B's failures spent the operator pod's address budget and A's calls got 429), and the
// operator must not keep a context (and a poller) per garbage token. Timing-based comparisons are in
// bench/noisy-neighbour.ts; this test only proves that B cannot get in A's way.

const secret = (namespace: string, name: string, token: string): KubeObject =>
  ({ apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, stringData: { token } }) as KubeObject;
const garbage = () => `mds_${randomBytes(32).toString("base64url")}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dir: string;
let stack: ChaosStack;
let metricsPort: number;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}
async function liveContexts(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return Number(/^mds_operator_api_contexts (\S+)$/m.exec(text)?.[1] ?? NaN);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-noisy-"));
  // 5 failures, then one per 20 s: the lockout shows at once where it exists.
  stack = await startChaosStack({
    dir,
    instanceId: "noisy",
    logLevel: "info",
    pollFast: "300ms",
    pollSlow: "30s",
    service: { authRateLimit: { perSecond: 0.05, burst: 5 } },
  });
  metricsPort = await freePort();
  stack.startOperator({
    identity: "noisy",
    leaderElect: false,
    args: ["--metrics-address", `127.0.0.1:${metricsPort}`],
  });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("team B looping a garbage token", () => {
  it("does not keep team A's database from getting Ready, and leaves no context behind", async () => {
    const pool = createPool(stack.controlUrl!, 1);
    const tokenA = (await createServiceToken(pool, { workspace: "team-a", name: "team-a" })).token;
    await pool.end();
    for (const ns of ["team-a", "team-b"])
      await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    await stack.kube.apply(secret("team-a", "mds-credentials", tokenA));

    // Team B: three Projects, each with its own Secret of garbage, rotated every half second and re-requested every 100 ms.
    let running = true;
    let rotations = 0;
    const loop = (async () => {
      while (running) {
        for (let i = 0; i < 3; i++) await stack.kube.apply(secret("team-b", `garbage-${i}`, garbage()));
        rotations++;
        for (let round = 0; round < 5 && running; round++) {
          const at = new Date().toISOString();
          for (let i = 0; i < 3; i++) {
            await stack.kube.apply({
              apiVersion: mdsApiVersion,
              kind: "Project",
              metadata: {
                name: `noisy-${i}`,
                namespace: "team-b",
                annotations: { "mds.dev/reconcile-requested-at": at },
              },
              spec: { displayName: `noisy-${i}`, credentials: { secretRef: { name: `garbage-${i}` } } },
            } as KubeObject);
          }
          await sleep(100);
        }
      }
    })();
    try {
      // B's loop is under way once its Project is refused (CredentialsInvalid; RateLimited where B's failures lock the address).
      await eventually(
        async () =>
          expect(
            conditionOf(await stack.kube.get(mdsApiVersion, "Project", "team-b", "noisy-0"), "Synced")?.status,
          ).toBe("False"),
        { timeoutMs: 30_000 },
      );
      stack.apiProxy.resetStats();
      await stack.kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Project",
        metadata: { name: "app", namespace: "team-a" },
        spec: { displayName: "app", deletionPolicy: "Delete" },
      });
      await stack.kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Database",
        metadata: { name: "orders", namespace: "team-a" },
        spec: { projectRef: { name: "app" }, deletionPolicy: "Delete", connectionSecret: { name: "orders-db" } },
      });
      await eventually(
        async () => expect(isReady(await stack.kube.get(mdsApiVersion, "Database", "team-a", "orders"))).toBe(true),
        { timeoutMs: 60_000 },
      );
      // The service never refused anyone for B's failures: no 429 while A worked.
      const { byStatus } = stack.apiProxy.stats();
      expect(byStatus["429"] ?? 0).toBe(0);
      // B is told what is wrong with its own token, not that it is being throttled.
      expect(conditionOf(await stack.kube.get(mdsApiVersion, "Project", "team-b", "noisy-0"), "Synced")?.reason).toBe(
        "CredentialsInvalid",
      );
      // B's garbage contexts were dropped when refused: team A's, at most one of B's in flight.
      expect(await liveContexts()).toBeLessThanOrEqual(3);
    } finally {
      running = false;
      await loop;
    }
    expect(rotations).toBeGreaterThan(1);
    // B stopped: nothing of its tokens polls on. Only team A's context is live.
    await eventually(async () => expect(await liveContexts()).toBe(1), { timeoutMs: 30_000 });
  }, 150_000);
});
