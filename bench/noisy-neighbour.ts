// `npm run bench:noisy-neighbour -- [--samples 12] [--noisy-projects 4] [--bump-ms 200] [--rotate-ms 1000] [--keep]`
// A noisy neighbour: a team's bad token must never delay another team's reconcile. On the local stack (service,
// devkube, one operator process, the service's production authentication limits), team A creates Databases one at a
// time and each is timed from apply to Ready, in interleaved rounds of three: team B quiet; team B looping a garbage
// token (its Projects name Secrets holding garbage, rotated every --rotate-ms, and `mds.dev/reconcile-requested-at`
// bumped on them every --bump-ms); and, as a control, team B looping the very same way with its valid token. One run,
// so every arm shares the machine's load. Target: p99 with B looping garbage ≤ 1.1 × p99 with B quiet; exits 1 when
// missed. The control tells what the token has to do with it: a loop of Kubernetes writes costs the same whatever the
// token (on a small shared machine the API server and the service compete for the same cores).
import { now, percentile, sleep, waitFor } from "./timing.ts";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { createPool } from "../src/service/store/pool.ts";
import { createServiceToken } from "../src/service/domain/tokens.ts";
import { startChaosStack, type ChaosStack } from "../test/support/chaos/stack.ts";
import { mdsApiVersion } from "../test/support/chaos/invariants.ts";
import { conditionOf, createKubeObjects, isReady, type KubeObject } from "../test/support/kube-objects.ts";

const { values } = parseArgs({
  options: {
    samples: { type: "string", default: "12" },
    "noisy-projects": { type: "string", default: "4" },
    "bump-ms": { type: "string", default: "200" },
    "rotate-ms": { type: "string", default: "1000" },
    keep: { type: "boolean", default: false },
    /** Internal: run team B's loop against this kubeconfig (see teamB). */
    "team-b": { type: "string" },
  },
});
const samples = Number(values.samples);
const noisyProjects = Number(values["noisy-projects"]);
const bumpMs = Number(values["bump-ms"]);
const rotateMs = Number(values["rotate-ms"]);
const target = 1.1;

const ms = (v: number) => `${Math.round(v)} ms`;
/** A garbage token of the service's shape (so it is looked up, the costlier case), never a valid one. */
const garbageToken = () => `mds_${randomBytes(32).toString("base64url")}`;
/** A token Secret; `rotation` changes it on every write even when the token stays (the valid arm writes as much as the garbage one). */
const secret = (namespace: string, name: string, token: string, rotation = 0): KubeObject =>
  ({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace, annotations: { "bench.mds.dev/rotation": String(rotation) } },
    stringData: { token },
  }) as KubeObject;
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * Team B: Projects acting with garbage tokens, rotated and re-requested in a loop. It runs in a process of its own
 * (this file with --team-b), as team B's kubectl would: its requests load devkube (the API server) as they would a
 * cluster's, but not the process that hosts the service and devkube here. Started once (a Node start is seconds of
 * CPU on a busy machine), then switched on and off over stdin ("on", "off": answered with the counts so far).
 */
async function runTeamB(kubeconfig: string): Promise<never> {
  const kube = createKubeObjects(kubeconfig);
  let running = false;
  let bumps = 0;
  let rotations = 0;
  let lastRotation = -Infinity;
  let loop: Promise<void> = Promise.resolve();
  /** "garbage": Projects noisy-i with fresh garbage on every rotation; "valid <token>": Projects steady-i, the same writes with B's valid token. */
  async function run(mode: "garbage" | "valid", validToken: string) {
    const project = mode === "garbage" ? "noisy" : "steady";
    while (running) {
      if (now() - lastRotation >= rotateMs) {
        lastRotation = now();
        const token = () => (mode === "garbage" ? garbageToken() : validToken);
        for (let i = 0; i < noisyProjects; i++) await kube.apply(secret("team-b", `${mode}-${i}`, token(), rotations));
        await kube.apply(secret("team-b", "mds-credentials", token(), rotations));
        rotations++;
      }
      const at = new Date().toISOString();
      for (let i = 0; i < noisyProjects; i++) {
        await kube.apply({
          apiVersion: mdsApiVersion,
          kind: "Project",
          metadata: {
            name: `${project}-${i}`,
            namespace: "team-b",
            annotations: { "mds.dev/reconcile-requested-at": at },
          },
          spec: { displayName: `${project}-${i}`, credentials: { secretRef: { name: `${mode}-${i}` } } },
        } as KubeObject);
        bumps++;
      }
      await sleep(bumpMs);
    }
  }
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, mode, token] = line.split(" ");
    if (command === "on" && !running) {
      running = true;
      loop = run(mode === "valid" ? "valid" : "garbage", token ?? "");
    } else if (command === "off") {
      running = false;
      await loop;
      process.stdout.write(`${JSON.stringify({ bumps, rotations })}\n`);
    }
  }
  process.exit(0);
}
if (values["team-b"] !== undefined) await runTeamB(values["team-b"]);

async function teamB(stack: ChaosStack, validToken: string) {
  const args = [
    "--noisy-projects",
    String(noisyProjects),
    "--bump-ms",
    String(bumpMs),
    "--rotate-ms",
    String(rotateMs),
  ];
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), "--team-b", stack.devkube.kubeconfigPath, ...args],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const totals = { bumps: 0, rotations: 0 };
  const start = (mode: "garbage" | "valid") =>
    void child.stdin.write(mode === "garbage" ? "on garbage\n" : `on valid ${validToken}\n`);
  const stop = async () => {
    child.stdin.write("off\n");
    const answer = await lines.next();
    if (answer.done === true) throw new Error("team B's process ended");
    Object.assign(totals, JSON.parse(answer.value) as typeof totals);
  };
  // Ready once it answers (its modules are loaded and it has reached devkube once).
  start("garbage");
  await stop();
  return { start, stop, counts: () => totals, end: () => child.stdin.end() };
}

const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-noisy-"));
console.log(`bench:noisy-neighbour: state in ${dir}`);
// The service's production limits for failed authentication (test stacks raise them): the lockout this measures.
const stack = await startChaosStack({
  dir,
  instanceId: "noisy",
  logLevel: "info",
  pollFast: "1s",
  pollSlow: "60s",
  service: { authRateLimit: { perSecond: 1, burst: 30 } },
});
const metricsPort = await freePort();
stack.startOperator({
  identity: "noisy",
  leaderElect: false,
  args: ["--concurrency", "4", "--metrics-address", `127.0.0.1:${metricsPort}`],
});
const rows: Array<[string, string, string]> = [];
let met = false;
let b: Awaited<ReturnType<typeof teamB>> | undefined;
try {
  const pool = createPool(stack.controlUrl!, 1);
  const tokenA = (await createServiceToken(pool, { workspace: "team-a", name: "team-a-operator" })).token;
  const tokenB = (await createServiceToken(pool, { workspace: "team-b", name: "team-b-operator" })).token;
  await pool.end();
  for (const ns of ["team-a", "team-b"])
    await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  b = await teamB(stack, tokenB);
  await stack.kube.apply(secret("team-a", "mds-credentials", tokenA));
  await stack.kube.apply({
    apiVersion: mdsApiVersion,
    kind: "Project",
    metadata: { name: "app", namespace: "team-a" },
    spec: { displayName: "app", deletionPolicy: "Delete" },
  });
  await waitFor(
    "team A's Project Ready",
    120_000,
    async () => isReady(await stack.kube.get(mdsApiVersion, "Project", "team-a", "app")),
    200,
  );

  const database = (name: string): KubeObject => ({
    apiVersion: mdsApiVersion,
    kind: "Database",
    metadata: { name, namespace: "team-a" },
    spec: { projectRef: { name: "app" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } },
  });
  async function createToReady(name: string): Promise<number> {
    const t0 = now();
    await stack.kube.apply(database(name));
    await waitFor(
      `${name} Ready`,
      120_000,
      async () => isReady(await stack.kube.get(mdsApiVersion, "Database", "team-a", name)),
      50,
    );
    const elapsed = now() - t0;
    await stack.kube.remove(mdsApiVersion, "Database", "team-a", name);
    await waitFor(
      `${name} deleted`,
      120_000,
      async () => (await stack.kube.get(mdsApiVersion, "Database", "team-a", name)) === undefined,
      100,
    );
    return elapsed;
  }

  // Warm-up, not counted: a first create, B's valid Projects created at the service, a first garbage context.
  await createToReady("warm-quiet");
  b.start("valid");
  await waitFor(
    "team B's valid Projects Ready",
    180_000,
    async () => {
      for (let i = 0; i < noisyProjects; i++)
        if (!isReady(await stack.kube.get(mdsApiVersion, "Project", "team-b", `steady-${i}`))) return false;
      return true;
    },
    500,
  );
  await b.stop();
  b.start("garbage");
  await sleep(2_000);
  await createToReady("warm-noisy");
  await b.stop();

  // Three arms, interleaved, in a rotating order: B quiet, B looping a garbage token, and (the control) B looping
  // the very same way with its valid token: what any team's loop costs, whatever its token.
  const arms = { quiet: [] as number[], garbage: [] as number[], valid: [] as number[] };
  const orders = [
    ["quiet", "garbage", "valid"],
    ["garbage", "valid", "quiet"],
    ["valid", "quiet", "garbage"],
  ] as const;
  stack.apiProxy.resetStats();
  for (let i = 0; i < samples; i++) {
    for (const arm of orders[i % 3]!) {
      // The same pause before each create (B's loop gets going in it), so only B's loop tells the arms apart.
      if (arm !== "quiet") b.start(arm);
      await sleep(1_000);
      arms[arm].push(await createToReady(`${arm}-${i}`));
      if (arm !== "quiet") await b.stop();
    }
    process.stdout.write(
      `\r  ${i + 1}/${samples} rounds: quiet ${ms(arms.quiet.at(-1)!)}, garbage ${ms(arms.garbage.at(-1)!)}, valid ${ms(arms.valid.at(-1)!)}   `,
    );
  }
  process.stdout.write("\n");
  const quiet = arms.quiet;
  const noisy = arms.garbage;
  const stats = stack.apiProxy.stats();
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const metric = (re: RegExp) =>
    metrics
      .split("\n")
      .filter((l) => re.test(l))
      .map((l) => l.replace(/^mds_operator_/, ""))
      .join(", ");
  const stalled = (await stack.kube.list(mdsApiVersion, "Project", "team-b"))
    .filter((p) => p.metadata.name.startsWith("noisy-"))
    .map((p) => conditionOf(p, "Synced")?.reason ?? "?");

  const ratio = percentile(noisy, 99) / percentile(quiet, 99);
  met = ratio <= target;
  rows.push([
    "team A create → Ready, B quiet: p50 / p99",
    `${ms(percentile(quiet, 50))} / ${ms(percentile(quiet, 99))}`,
    "-",
  ]);
  rows.push([
    "team A create → Ready, B looping a garbage token: p50 / p99",
    `${ms(percentile(noisy, 50))} / ${ms(percentile(noisy, 99))}`,
    "-",
  ]);
  rows.push(["p99 ratio (looping / quiet)", ratio.toFixed(2), `≤ ${target}`]);
  rows.push([
    "control: B looping the same way with its valid token: p50 / p99",
    `${ms(percentile(arms.valid, 50))} / ${ms(percentile(arms.valid, 99))}`,
    "-",
  ]);
  rows.push([
    "p50 / p99 ratio garbage loop / valid loop",
    `${(percentile(noisy, 50) / percentile(arms.valid, 50)).toFixed(2)} / ${(percentile(noisy, 99) / percentile(arms.valid, 99)).toFixed(2)}`,
    "≤ 1 (a bad token costs no more than a good one)",
  ]);
  rows.push([
    "team B's loop",
    `${b.counts().bumps} reconcile requests, ${b.counts().rotations} token rotations (${noisyProjects + 1} Secrets each)`,
    "-",
  ]);
  rows.push([
    "API answers by status while measured",
    Object.entries(stats.byStatus)
      .map(([s, c]) => `${s} ×${c}`)
      .join(", "),
    "no 429",
  ]);
  rows.push(["operator API contexts at the end", metric(/^mds_operator_api_contexts /), "small"]);
  rows.push(["operator API context evictions", metric(/^mds_operator_api_context_evictions_total/), "-"]);
  rows.push([
    "operator reconciles of Projects (B's), by result",
    metric(/^mds_operator_reconcile_duration_seconds_count\{kind="Project"/),
    "-",
  ]);
  rows.push(["operator writes to Kubernetes", metric(/^mds_operator_kube_writes_total/), "-"]);
  rows.push(["team B's garbage Projects", [...new Set(stalled)].join(", "), "CredentialsInvalid"]);
  rows.push([
    `samples (rounds)`,
    `${samples}; quiet ms: ${quiet.map(Math.round).join(", ")}; garbage ms: ${noisy.map(Math.round).join(", ")}; valid ms: ${arms.valid.map(Math.round).join(", ")}`,
    "-",
  ]);
} finally {
  await b?.stop();
  b?.end();
  console.log("\n| metric | result | target |\n|---|---|---|");
  for (const [m, v, t] of rows) console.log(`| ${m} | ${v} | ${t} |`);
  await stack.stop();
  if (!values.keep) await rm(dir, { recursive: true, force: true });
}
console.log(met ? `\ntarget met: p99 ratio ≤ ${target}` : `\ntarget MISSED: p99 ratio > ${target}`);
process.exit(met ? 0 : 1);
