// `npm run bench:noisy-neighbour -- [--samples 20] [--noisy-projects 4] [--bump-ms 200] [--rotate-ms 1000] [--keep]`
// Issue 22, attack 2: a team's bad token must never delay another team's reconcile. On the local stack (service,
// devkube, one operator process, the service's production authentication limits), team A creates Databases one at a
// time and each is timed from apply to Ready, in interleaved pairs: once while team B is quiet and once while team B
// loops a garbage token (its Projects name Secrets holding garbage, rotated every --rotate-ms, and
// `mds.dev/reconcile-requested-at` bumped on them every --bump-ms). One run, so both sides share the machine's load.
// Target: p99 with B looping ≤ 1.1 × p99 without. Exits 1 when missed.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createPool } from "../src/service/store/pool.ts";
import { createServiceToken } from "../src/service/tokens.ts";
import { startChaosStack, type ChaosStack } from "../test/support/chaos/stack.ts";
import { mdsApiVersion } from "../test/support/chaos/invariants.ts";
import { conditionOf, isReady, type KubeObject } from "../test/support/kube-objects.ts";

const { values } = parseArgs({
  options: {
    samples: { type: "string", default: "20" },
    "noisy-projects": { type: "string", default: "4" },
    "bump-ms": { type: "string", default: "200" },
    "rotate-ms": { type: "string", default: "1000" },
    keep: { type: "boolean", default: false },
  },
});
const samples = Number(values.samples);
const noisyProjects = Number(values["noisy-projects"]);
const bumpMs = Number(values["bump-ms"]);
const rotateMs = Number(values["rotate-ms"]);
const target = 1.1;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const ms = (v: number) => `${Math.round(v)} ms`;
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}
async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>, intervalMs = 20): Promise<T> {
  const deadline = now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    if (now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(intervalMs);
  }
}
/** A garbage token of the service's shape (so it is looked up, the costlier case), never a valid one. */
const garbageToken = () => `mds_${randomBytes(32).toString("base64url")}`;
const secret = (namespace: string, name: string, token: string): KubeObject => ({ apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, stringData: { token } }) as KubeObject;
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/** Team B: Projects acting with garbage tokens, rotated and re-requested in a loop while `running`. */
function teamB(stack: ChaosStack) {
  let running = false;
  let loop: Promise<void> | undefined;
  let bumps = 0;
  let rotations = 0;
  async function run() {
    let lastRotation = 0;
    while (running) {
      if (now() - lastRotation >= rotateMs) {
        lastRotation = now();
        for (let i = 0; i < noisyProjects; i++) await stack.kube.apply(secret("team-b", `garbage-${i}`, garbageToken()));
        await stack.kube.apply(secret("team-b", "mds-credentials", garbageToken()));
        rotations++;
      }
      const at = new Date().toISOString();
      for (let i = 0; i < noisyProjects; i++) {
        await stack.kube.apply({ apiVersion: mdsApiVersion, kind: "Project", metadata: { name: `noisy-${i}`, namespace: "team-b", annotations: { "mds.dev/reconcile-requested-at": at } }, spec: { displayName: `noisy-${i}`, credentials: { secretRef: { name: `garbage-${i}` } } } } as KubeObject);
        bumps++;
      }
      await sleep(bumpMs);
    }
  }
  return {
    start() {
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      await loop;
    },
    counts: () => ({ bumps, rotations }),
  };
}

const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-noisy-"));
console.log(`bench:noisy-neighbour: state in ${dir}`);
// The service's production limits for failed authentication (test stacks raise them): the lockout this measures.
const stack = await startChaosStack({ dir, instanceId: "noisy", logLevel: "info", pollFast: "1s", pollSlow: "60s", service: { authRateLimit: { perSecond: 1, burst: 30 } } });
const metricsPort = await freePort();
stack.startOperator({ identity: "noisy", leaderElect: false, args: ["--concurrency", "4", "--metrics-address", `127.0.0.1:${metricsPort}`] });
const rows: Array<[string, string, string]> = [];
let met = false;
const b = teamB(stack);
try {
  const pool = createPool(stack.controlUrl!, 1);
  const tokenA = (await createServiceToken(pool, { workspace: "team-a", name: "team-a-operator" })).token;
  await pool.end();
  for (const ns of ["team-a", "team-b"]) await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await stack.kube.apply(secret("team-a", "mds-credentials", tokenA));
  await stack.kube.apply({ apiVersion: mdsApiVersion, kind: "Project", metadata: { name: "app", namespace: "team-a" }, spec: { displayName: "app", deletionPolicy: "Delete" } });
  await waitFor("team A's Project Ready", 120_000, async () => isReady(await stack.kube.get(mdsApiVersion, "Project", "team-a", "app")), 200);

  const database = (name: string): KubeObject => ({ apiVersion: mdsApiVersion, kind: "Database", metadata: { name, namespace: "team-a" }, spec: { projectRef: { name: "app" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } } });
  async function createToReady(name: string): Promise<number> {
    const t0 = now();
    await stack.kube.apply(database(name));
    await waitFor(`${name} Ready`, 120_000, async () => isReady(await stack.kube.get(mdsApiVersion, "Database", "team-a", name)));
    const elapsed = now() - t0;
    await stack.kube.remove(mdsApiVersion, "Database", "team-a", name);
    await waitFor(`${name} deleted`, 120_000, async () => (await stack.kube.get(mdsApiVersion, "Database", "team-a", name)) === undefined, 100);
    return elapsed;
  }

  // One warm-up each way (first create, first garbage context), not counted.
  await createToReady("warm-quiet");
  b.start();
  await sleep(2_000);
  await createToReady("warm-noisy");
  await b.stop();

  const quiet: number[] = [];
  const noisy: number[] = [];
  stack.apiProxy.resetStats();
  for (let i = 0; i < samples; i++) {
    // Alternate which side goes first, so neither always follows the other.
    const order = i % 2 === 0 ? (["quiet", "noisy"] as const) : (["noisy", "quiet"] as const);
    for (const side of order) {
      if (side === "noisy") {
        b.start();
        await sleep(1_000);
        noisy.push(await createToReady(`noisy-${i}`));
        await b.stop();
      } else {
        quiet.push(await createToReady(`quiet-${i}`));
      }
    }
    process.stdout.write(`\r  ${i + 1}/${samples} pairs: quiet ${ms(quiet.at(-1)!)}, noisy ${ms(noisy.at(-1)!)}   `);
  }
  process.stdout.write("\n");
  const stats = stack.apiProxy.stats();
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const metric = (re: RegExp) => metrics.split("\n").filter((l) => re.test(l)).map((l) => l.replace(/^mds_operator_/, "")).join(", ");
  const stalled = (await stack.kube.list(mdsApiVersion, "Project", "team-b")).map((p) => conditionOf(p, "Synced")?.reason ?? "?");

  const ratio = percentile(noisy, 99) / percentile(quiet, 99);
  met = ratio <= target;
  rows.push(["team A create → Ready, B quiet: p50 / p99", `${ms(percentile(quiet, 50))} / ${ms(percentile(quiet, 99))}`, "-"]);
  rows.push(["team A create → Ready, B looping a garbage token: p50 / p99", `${ms(percentile(noisy, 50))} / ${ms(percentile(noisy, 99))}`, "-"]);
  rows.push(["p99 ratio (looping / quiet)", ratio.toFixed(2), `≤ ${target}`]);
  rows.push(["team B's loop", `${b.counts().bumps} reconcile requests, ${b.counts().rotations} token rotations (${noisyProjects + 1} Secrets each)`, "-"]);
  rows.push(["API answers by status while measured", Object.entries(stats.byStatus).map(([s, c]) => `${s} ×${c}`).join(", "), "no 429"]);
  rows.push(["operator API contexts at the end", metric(/^mds_operator_api_contexts /), "small"]);
  rows.push(["operator API context evictions", metric(/^mds_operator_api_context_evictions_total/), "-"]);
  rows.push(["team B's Projects", [...new Set(stalled)].join(", "), "CredentialsInvalid"]);
  rows.push([`samples (pairs)`, `${samples}; quiet ms: ${quiet.map(Math.round).join(", ")}; noisy ms: ${noisy.map(Math.round).join(", ")}`, "-"]);
} finally {
  await b.stop();
  console.log("\n| metric | result | target |\n|---|---|---|");
  for (const [m, v, t] of rows) console.log(`| ${m} | ${v} | ${t} |`);
  await stack.stop();
  if (!values.keep) await rm(dir, { recursive: true, force: true });
}
console.log(met ? `\ntarget met: p99 ratio ≤ ${target}` : `\ntarget MISSED: p99 ratio > ${target}`);
process.exit(met ? 0 : 1);
