// `npm run bench:operator -- [--sizes 100,1000] [--samples 10] [--rss-objects 10000] [--resync 60] [--spares N]
//    [--dist DIR] [--no-leader-elect] [--api service|emulator] [--outage 0] [--churn-minutes 0] [--churn-size 10] [--keep]`
// The operator as shipped: run from dist/ with the image's environment
// (bench/shipped-operator.ts) and production settings (poll-fast 1 s, 4 workers, leader election, the client's
// 10 requests/s per credential), against the service with its production settings (rate limit, spare pool, job
// polling; `--spares` overrides the pool). Measured: operator RSS with one object, apply-to-Secret latency for one
// Database, for each N the service's own time for N creates and then the operator's time to N Ready in the same run,
// its overhead = time to N Ready / max(N/rate, the service's time), API calls per create, one steady-state resync
// (API calls, Kubernetes writes) and the RSS at --rss-objects Database objects (the N live, the rest paused).
// API calls are counted by the fault proxy in front of the service; Kubernetes requests by devkube's request log.
// Every target is checked: a miss exits 1 (an error 2). Not part of npm test.
import { now, percentile, sleep, waitFor } from "./timing.ts";
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startChaosStack, type ChaosStack, type OperatorProcess } from "../test/support/chaos/stack.ts";
import { mdsApiVersion } from "../test/support/chaos/invariants.ts";
import { conditionOf, isReady, type KubeObject } from "../test/support/kube-objects.ts";
import { ServiceConfig } from "../src/service/config/config.ts";
import { createPool } from "../src/service/store/pool.ts";
import { sparePrefix } from "../src/service/placement/provisioner.ts";
import { createClient } from "../src/client/index.ts";
import { shippedOperator } from "./shipped-operator.ts";

const { values } = parseArgs({
  options: {
    samples: { type: "string", default: "10" },
    sizes: { type: "string", default: "100,1000" },
    "rss-objects": { type: "string", default: "10000" },
    resync: { type: "string", default: "60" },
    outage: { type: "string", default: "0" },
    "churn-minutes": { type: "string", default: "0" },
    "churn-size": { type: "string", default: "10" },
    /** The service's spare pool (default: its production setting). */
    spares: { type: "string" },
    dist: { type: "string" },
    "no-leader-elect": { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
    /** service (default) or emulator: the public-API emulator in front of the service (no replay, public codes). */
    api: { type: "string", default: "service" },
  },
});
const samples = Number(values.samples);
const sizes = (values.sizes ?? "")
  .split(",")
  .filter((s) => s !== "")
  .map(Number);
const rssObjects = Number(values["rss-objects"]);
const resyncSeconds = Number(values.resync);
const outageSeconds = Number(values.outage);
const churnMinutes = Number(values["churn-minutes"]);
const churnSize = Number(values["churn-size"]);

// Production settings, read from the service's config schema (its defaults are what a deployment runs).
const production = {
  spareDatabases: ServiceConfig.shape.spareDatabases.parse(undefined),
  databasesPerWorkspace: ServiceConfig.shape.databasesPerWorkspace.parse(undefined),
  rateLimit: ServiceConfig.shape.rateLimit.parse(undefined),
  jobPollIntervalMs: ServiceConfig.shape.jobPollIntervalMs.parse(undefined),
};
const spareTarget = values.spares === undefined ? production.spareDatabases : Number(values.spares);
/** The operator's budget per credential (src/client's default, which the operator keeps unless --api-rate is set). */
const operatorRate = { perSecond: 10, burst: 20 };

const results: Array<{ metric: string; value: string; target: string; met: boolean | undefined }> = [];
/** `met`: undefined for a figure without a target. */
const record = (metric: string, value: string, target = "-", met?: boolean) => {
  results.push({ metric, value, target, met });
  console.log(`  ${metric}: ${value}   (target ${target}${met === undefined ? "" : met ? ": met" : ": MISSED"})`);
};

const ms = (v: number) => `${Math.round(v)} ms`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ");

async function rssMb(proc: OperatorProcess): Promise<number> {
  const status = await readFile(`/proc/${proc.pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round((kb / 1024) * 10) / 10;
}

function databaseObject(ns: string, name: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    apiVersion: mdsApiVersion,
    kind: "Database",
    metadata: { name, namespace: ns, ...extra },
    spec: { projectRef: { name: "bench" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } },
  };
}

async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    }),
  );
}

async function countReady(stack: ChaosStack, ns: string): Promise<{ ready: number; total: number; paused: number }> {
  const list = await stack.kube.list(mdsApiVersion, "Database", ns);
  let ready = 0;
  let paused = 0;
  for (const d of list) {
    if (isReady(d)) ready++;
    if (conditionOf(d, "Synced")?.reason === "ReconcilePaused") paused++;
  }
  return { ready, total: list.length, paused };
}

/** The service alone, one database at a time: POST → ready, then deleted (the reference of apply → Secret). */
async function serviceProvisioningMs(stack: ChaosStack, projectId: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    const res = await fetch(`${stack.api.directUrl}/v1/projects/${projectId}/databases`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.api.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: `direct-${i}` }),
    });
    const id = ((await res.json()) as { data: { id: string } }).data.id;
    await waitFor(
      "direct database ready",
      60_000,
      async () => {
        const r = await fetch(`${stack.api.directUrl}/v1/databases/${id}`, {
          headers: { authorization: `Bearer ${stack.api.token}` },
        });
        return ((await r.json()) as { data: { status: string } }).data.status === "ready";
      },
      10,
    );
    out.push(now() - t0);
    await fetch(`${stack.api.directUrl}/v1/databases/${id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${stack.api.token}` },
    });
  }
  return out;
}

/**
 * The service alone, N creates at once (16 in flight, paced at the service's own rate limit, its 429s retried by the
 * client) in a project of their own, until every one is ready (seen by listing the project every 500 ms); then
 * deleted. Its time is what N creates cost at this service, with nothing of the operator in it.
 */
async function serviceBurstSeconds(stack: ChaosStack, projectId: string, n: number): Promise<number> {
  // Paced at the service's own limit: unpaced, 1,000 creates from a full spare pool outrun it and the client's
  // retries of the 429s run out (the N = 1000 run failed on "alone-595").
  const { perSecond: requestsPerSecond, burst } = production.rateLimit;
  const client = createClient({
    baseUrl: stack.api.directUrl,
    token: stack.api.token,
    rateLimit: { requestsPerSecond, burst },
  });
  const ids: string[] = [];
  const t0 = now();
  await inParallel(
    Array.from({ length: n }, (_, i) => i),
    16,
    async (i) => void ids.push((await client.createProjectDatabase(projectId, { name: `alone-${i}` })).id),
  );
  const pending = new Set(ids);
  await waitFor(
    `${n} direct databases ready`,
    60 * 60_000,
    async () => {
      let cursor: string | undefined;
      do {
        const page = await client.listProjectDatabases(projectId, { cursor, limit: 100 });
        for (const d of page.data) if (d.status === "ready") pending.delete(d.id);
        cursor = page.pagination.nextCursor ?? undefined;
      } while (cursor !== undefined);
      return pending.size === 0;
    },
    500,
  );
  const seconds = (now() - t0) / 1000;
  await inParallel(ids, 8, async (id) => void (await client.deleteDatabase(id)));
  return seconds;
}

const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-operator-"));
console.log(`bench:operator: state in ${dir}; load average ${load()}`);
if (values.api !== "service" && values.api !== "emulator")
  throw new Error(`--api must be service or emulator, got "${values.api}"`);
const shipped = await shippedOperator(path.join(dir, "app"), values.dist);
console.log(
  `  operator from dist/ (${shipped.source}), env ${Object.entries(shipped.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ")}`,
);
console.log(
  `  service: spare pool ${spareTarget}${spareTarget === production.spareDatabases ? " (production)" : ` (production: ${production.spareDatabases})`}, rate limit ${production.rateLimit.perSecond}/s burst ${production.rateLimit.burst}, job polling ${production.jobPollIntervalMs} ms`,
);
const stack = await startChaosStack({
  dir,
  instanceId: "bench",
  logLevel: "info",
  pollFast: "1s",
  pollSlow: `${resyncSeconds}s`,
  api: values.api,
  service: {
    spareDatabases: spareTarget,
    // The workspace quota (production: 1,000 live databases) would refuse the service-alone burst at N = 1,000 (its
    // project's default database counts): it is raised past the biggest N, nothing else of the service changes.
    databasesPerWorkspace: Math.max(production.databasesPerWorkspace, 2 * Math.max(0, ...sizes) + 10),
    rateLimit: production.rateLimit,
    jobPollIntervalMs: production.jobPollIntervalMs,
  },
});
const operator = stack.startOperator({
  identity: "bench",
  leaderElect: !values["no-leader-elect"],
  entry: shipped.entry,
  env: shipped.env,
});
let exitCode = 0;
try {
  if (stack.controlUrl === undefined) throw new Error("the stack does not expose the service's control database");
  const control = createPool(stack.controlUrl, 2);
  const spares = async () =>
    Number(
      (
        await control.query<{ n: string }>("SELECT count(*) AS n FROM pg_database WHERE datname LIKE $1", [
          `${sparePrefix}%`,
        ])
      ).rows[0]!.n,
    );
  /** Every measurement starts with the pool full, as a service that has been idle has it. */
  const sparesFull = async () => {
    const t0 = now();
    await waitFor(`${spareTarget} spare databases`, 60 * 60_000, async () => (await spares()) >= spareTarget, 1000);
    console.log(`  spare pool full (${await spares()}) after ${((now() - t0) / 1000).toFixed(0)} s`);
  };
  const ns = "bench";
  await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await stack.kube.apply({
    apiVersion: mdsApiVersion,
    kind: "Project",
    metadata: { name: "bench", namespace: ns },
    spec: { displayName: "bench", deletionPolicy: "Delete" },
  });
  await waitFor("project Ready", 120_000, async () =>
    isReady(await stack.kube.get(mdsApiVersion, "Project", ns, "bench")),
  );
  await sleep(10_000);
  const rssOne = await rssMb(operator);
  record("operator RSS with one object (a Project)", `${rssOne} MB`, "≤ 90 MB", rssOne <= 90);
  const alone = createClient({ baseUrl: stack.api.directUrl, token: stack.api.token, rateLimit: false });
  const aloneProject = (await alone.createProject({ name: "bench-service-alone" })).id;
  await sparesFull();

  // 1. Apply-to-Secret latency for one Database at a time, next to the service's own provisioning time.
  if (samples > 0) {
    console.log(`\n1. apply-to-Secret latency, ${samples} samples`);
    const toSecret: number[] = [];
    const toReady: number[] = [];
    for (let i = 0; i < samples; i++) {
      const name = `lat-${i}`;
      const t0 = now();
      await stack.kube.apply(databaseObject(ns, name));
      await waitFor(
        "Secret",
        60_000,
        async () => (await stack.kube.get("v1", "Secret", ns, `${name}-conn`)) !== undefined,
        10,
      );
      toSecret.push(now() - t0);
      await waitFor(
        "Ready",
        60_000,
        async () => isReady(await stack.kube.get(mdsApiVersion, "Database", ns, name)),
        10,
      );
      toReady.push(now() - t0);
    }
    const provisioning = await serviceProvisioningMs(stack, aloneProject, samples);
    const p50 = percentile(provisioning, 50);
    const p99 = percentile(provisioning, 99);
    record("apply → Ready p50 / p99", `${ms(percentile(toReady, 50))} / ${ms(percentile(toReady, 99))}`);
    record("service alone: POST → ready p50 / p99", `${ms(p50)} / ${ms(p99)}`, "(reference)");
    const beyond50 = percentile(toSecret, 50) - p50;
    const beyond99 = percentile(toSecret, 99) - p99;
    record(
      "apply → Secret p50 / p99, beyond the service's",
      `${ms(percentile(toSecret, 50))} / ${ms(percentile(toSecret, 99))}: ${ms(beyond50)} / ${ms(beyond99)} beyond`,
      "≤ 250 ms / ≤ 1 s beyond",
      beyond50 <= 250 && beyond99 <= 1000,
    );
    for (let i = 0; i < samples; i++) await stack.kube.remove(mdsApiVersion, "Database", ns, `lat-${i}`);
    await waitFor("latency databases deleted", 120_000, async () => (await countReady(stack, ns)).total === 0, 500);
  }

  // 2. Time for N Databases to become Ready, next to the service's own time for N creates in the same run; each
  // size starts from none (the previous size's Databases deleted) and from a full spare pool.
  let created = 0;
  for (const [index, n] of sizes.entries()) {
    console.log(`\n2. ${n} Databases to Ready (load ${load()})`);
    await sparesFull();
    const serviceSeconds = await serviceBurstSeconds(stack, aloneProject, n);
    console.log(`  the service alone: ${n} creates ready in ${serviceSeconds.toFixed(1)} s`);
    await sparesFull();
    const names = Array.from({ length: n }, (_, k) => `db-${k}`);
    stack.apiProxy.resetStats();
    const t0 = now();
    await inParallel(names, 16, async (name) => void (await stack.kube.apply(databaseObject(ns, name))));
    created = n;
    const applied = now() - t0;
    let seen = 0;
    await waitFor(
      `${n} Ready`,
      60 * 60_000,
      async () => {
        const c = await countReady(stack, ns);
        if (c.ready !== seen) {
          seen = c.ready;
          process.stdout.write(`\r  ${c.ready}/${n} Ready after ${Math.round((now() - t0) / 1000)} s   `);
        }
        return c.ready >= n;
      },
      500,
    );
    const seconds = (now() - t0) / 1000;
    process.stdout.write("\n");
    const during = stack.apiProxy.stats();
    const atRate = n / operatorRate.perSecond;
    const overhead = seconds / Math.max(atRate, serviceSeconds);
    // At 1,000 and more the target is: within 5 % of what the rate allows, with the service not the
    // bottleneck (its own time under N/rate; a bigger --spares makes it so). Below, a fixed cost (the last create's
    // provisioning, the poll that sees it ready) weighs more: 25 %.
    const big = n >= 1000;
    const limit = big ? 1.05 : 1.25;
    record(
      `${n} new Databases Ready`,
      `${seconds.toFixed(1)} s (applies took ${(applied / 1000).toFixed(1)} s); N/rate ${atRate.toFixed(0)} s, the service alone ${serviceSeconds.toFixed(1)} s`,
      "-",
    );
    record(
      `operator overhead at N = ${n}: time to Ready / max(N/rate, service alone)`,
      `${overhead.toFixed(2)}`,
      `≤ ${limit}${big ? ", with the service alone under N/rate" : ""}`,
      overhead <= limit && (!big || serviceSeconds <= atRate),
    );
    const perCreate = during.total / n;
    record(
      `API calls while ${n} became Ready`,
      `${during.total}, ${perCreate.toFixed(3)} per create (${Object.entries(during.byRoute)
        .map(([r, c]) => `${r} ×${c}`)
        .join(", ")}); peak ${Math.max(0, ...Object.values(during.peakPerSecondByCredential))}/s`,
      big ? "≤ 1.02 per create" : "-",
      big ? perCreate <= 1.02 : undefined,
    );

    // 3. One steady-state resync: API calls and Kubernetes writes, counted while the harness is quiet.
    console.log(`\n3. steady-state resync at N = ${n} (window ${resyncSeconds} s + 5 s)`);
    await sleep(5_000);
    stack.apiProxy.resetStats();
    stack.kubeRequests.reset();
    await sleep((resyncSeconds + 5) * 1000);
    const api = stack.apiProxy.stats();
    const kube = stack.kubeRequests.counts();
    const leaseWrites = Object.entries(kube.writesByPath)
      .filter(([p]) => p.includes("/leases"))
      .reduce((a, [, c]) => a + c, 0);
    const writes = kube.writes - leaseWrites;
    record(
      `API calls in one resync at N = ${n}`,
      `${api.total} (${Object.entries(api.byRoute)
        .map(([r, c]) => `${r} ×${c}`)
        .join(", ")})`,
      `≤ ⌈N/100⌉ + 5 = ${Math.ceil(n / 100) + 5}`,
      api.total <= Math.ceil(n / 100) + 5,
    );
    record(
      `Kubernetes writes in one resync at N = ${n} (besides ${leaseWrites} Lease renewals)`,
      `${writes}${
        writes > 0
          ? ` (${Object.entries(kube.writesByPath)
              .filter(([p]) => !p.includes("/leases"))
              .map(([p, c]) => `${p} ×${c}`)
              .slice(0, 5)
              .join(", ")})`
          : ""
      }`,
      "0",
      writes === 0,
    );
    record(`operator RSS at ${n} Databases`, `${await rssMb(operator)} MB`);
    if (index < sizes.length - 1) {
      console.log(`  deleting the ${n} Databases`);
      await inParallel(names, 16, (name) => stack.kube.remove(mdsApiVersion, "Database", ns, name));
      await waitFor(`${n} deleted`, 60 * 60_000, async () => (await countReady(stack, ns)).total === 0, 2000);
      created = 0;
    }
  }
  // 4. Optional: an API outage, then convergence and the peak request rate after recovery.
  if (outageSeconds > 0) {
    console.log(`\n4. API outage of ${outageSeconds} s`);
    await stack.apiProxy.startOutage("unavailable");
    // Work that piles up during the outage: every Secret deleted must be rebuilt after it.
    const victims = Array.from({ length: Math.min(created, 50) }, (_, k) => `db-${k}-conn`);
    for (const v of victims) await stack.kube.remove("v1", "Secret", ns, v);
    await sleep(outageSeconds * 1000);
    stack.apiProxy.resetStats();
    await stack.apiProxy.endOutage();
    const t0 = now();
    await waitFor(
      "converged after outage",
      30 * 60_000,
      async () => {
        for (const v of victims) if ((await stack.kube.get("v1", "Secret", ns, v)) === undefined) return false;
        return (await countReady(stack, ns)).ready >= created;
      },
      1000,
    );
    const stats = stack.apiProxy.stats();
    const converged = (now() - t0) / 1000;
    const peak = Math.max(0, ...Object.values(stats.peakPerSecondByCredential));
    record(`converged after a ${outageSeconds} s outage`, `${converged.toFixed(1)} s`, "≤ 60 s", converged <= 60);
    record(
      "peak API requests per second after recovery (one credential)",
      `${peak}`,
      "≤ budget: 10/s sustained, burst 20 (≤ 30 in any second)",
      peak <= 30,
    );
  }

  // 6. Memory over churn: Databases created and deleted in a loop, the operator's RSS sampled every minute.
  if (churnMinutes > 0) {
    console.log(`\n6. churn for ${churnMinutes} min: ${churnSize} Databases created and deleted in a loop`);
    const churnNs = "churn";
    await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: churnNs } });
    await stack.kube.apply({
      apiVersion: mdsApiVersion,
      kind: "Project",
      metadata: { name: "bench", namespace: churnNs },
      spec: { displayName: "churn", deletionPolicy: "Delete" },
    });
    await waitFor("churn project Ready", 120_000, async () =>
      isReady(await stack.kube.get(mdsApiVersion, "Project", churnNs, "bench")),
    );
    const samplesMb: Array<{ minute: number; rss: number; cycles: number }> = [];
    const t0 = now();
    let cycles = 0;
    let nextSample = 0;
    while (now() - t0 < churnMinutes * 60_000) {
      const names = Array.from({ length: churnSize }, (_, k) => `churn-${cycles}-${k}`);
      for (const name of names) await stack.kube.apply(databaseObject(churnNs, name));
      await waitFor("churn Ready", 600_000, async () => (await countReady(stack, churnNs)).ready >= churnSize, 500);
      for (const name of names) await stack.kube.remove(mdsApiVersion, "Database", churnNs, name);
      await waitFor("churn deleted", 600_000, async () => (await countReady(stack, churnNs)).total === 0, 500);
      cycles++;
      const minute = (now() - t0) / 60_000;
      if (minute >= nextSample) {
        const rss = await rssMb(operator);
        samplesMb.push({ minute: Math.round(minute * 10) / 10, rss, cycles });
        console.log(
          `  minute ${minute.toFixed(1)}: RSS ${rss} MB after ${cycles} cycles (${cycles * churnSize} Databases created and deleted)`,
        );
        nextSample = Math.floor(minute) + 1;
      }
    }
    const first = samplesMb[0];
    const last = samplesMb[samplesMb.length - 1];
    const peak = Math.max(...samplesMb.map((x) => x.rss));
    record(
      `RSS over ${churnMinutes} min of churn (${cycles * churnSize} Databases created and deleted)`,
      `first ${first?.rss ?? NaN} MB, last ${last?.rss ?? NaN} MB, peak ${peak} MB; per-minute: ${samplesMb.map((x) => x.rss).join(", ")}`,
      "flat over an hour",
    );
  }

  // 5. RSS with many more Database objects cached: the extra ones are paused (no remote database each,
  // which this machine's disk could not hold at 10,000), so this measures the operator's caches and queues.
  if (rssObjects > created) {
    console.log(`\n5. RSS with ${rssObjects} Database objects (${created} live, ${rssObjects - created} paused)`);
    const names = Array.from({ length: rssObjects - created }, (_, k) => `paused-${k}`);
    const t0 = now();
    await inParallel(
      names,
      16,
      async (name) =>
        void (await stack.kube.apply(databaseObject(ns, name, { annotations: { "mds.dev/paused": "true" } }))),
    );
    console.log(`  applied in ${((now() - t0) / 1000).toFixed(1)} s`);
    await waitFor(
      "paused objects seen",
      30 * 60_000,
      async () => (await countReady(stack, ns)).paused >= names.length,
      5000,
    );
    await sleep(15_000);
    const rss = await rssMb(operator);
    // The target is stated for 10,000 objects with 1,000 live; other shapes are reported without one.
    const targeted = rssObjects === 10_000 && created === 1000;
    record(
      `operator RSS at ${rssObjects} Databases (${created} live)`,
      `${rss} MB`,
      targeted ? "≤ 120 MB" : "-",
      targeted ? rss <= 120 : undefined,
    );
  }
  await control.end();
  await alone.deleteProject(aloneProject).catch(() => undefined);
} catch (err) {
  console.error(`bench:operator failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  exitCode = 2;
} finally {
  console.log(`\noperator ${shipped.source}; spare pool ${spareTarget}; load average at the end ${load()}`);
  console.log("\n| metric | result | target |\n|---|---|---|");
  for (const r of results)
    console.log(`| ${r.metric} | ${r.value} | ${r.target}${r.met === undefined ? "" : r.met ? " ✓" : " **missed**"} |`);
  const missed = results.filter((r) => r.met === false);
  if (missed.length > 0) {
    console.log(`\n${missed.length} target(s) missed: ${missed.map((r) => r.metric).join("; ")}`);
    if (exitCode === 0) exitCode = 1;
  }
  await stack.stop();
  if (!values.keep) await rm(dir, { recursive: true, force: true });
}
process.exit(exitCode);
