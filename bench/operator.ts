// `npm run bench:operator -- [--samples 20] [--sizes 100,1000] [--rss-objects 10000] [--resync 60] [--outage 0]
//    [--churn-minutes 0] [--churn-size 10]`
// The operator's benchmark list (issue 5) on the local stack: apply-to-Secret latency for one
// Database, time for N Databases to become Ready, API calls and Kubernetes writes in one
// steady-state resync, operator RSS, and (optionally) convergence after an API outage.
// API calls are counted by the fault proxy in front of the service; Kubernetes requests by
// devkube's request log (the harness stays quiet while it counts).
import { now, percentile, sleep, waitFor } from "./timing.ts";
import { readFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startChaosStack, type ChaosStack, type OperatorProcess } from "../test/support/chaos/stack.ts";
import { mdsApiVersion } from "../test/support/chaos/invariants.ts";
import { conditionOf, isReady, type KubeObject } from "../test/support/kube-objects.ts";

const { values } = parseArgs({
  options: {
    samples: { type: "string", default: "20" },
    sizes: { type: "string", default: "100,1000" },
    "rss-objects": { type: "string", default: "10000" },
    resync: { type: "string", default: "60" },
    outage: { type: "string", default: "0" },
    "churn-minutes": { type: "string", default: "0" },
    "churn-size": { type: "string", default: "10" },
    concurrency: { type: "string", default: "4" },
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

const results: Array<{ metric: string; value: string; target: string }> = [];
const record = (metric: string, value: string, target: string) => {
  results.push({ metric, value, target });
  console.log(`  ${metric}: ${value}   (target ${target})`);
};

const ms = (v: number) => `${Math.round(v)} ms`;

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

const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-operator-"));
console.log(`bench:operator: state in ${dir}`);
if (values.api !== "service" && values.api !== "emulator")
  throw new Error(`--api must be service or emulator, got "${values.api}"`);
const stack = await startChaosStack({
  dir,
  instanceId: "bench",
  logLevel: "info",
  pollFast: "1s",
  pollSlow: `${resyncSeconds}s`,
  api: values.api,
});
const operator = stack.startOperator({
  identity: "bench",
  leaderElect: false,
  args: ["--concurrency", values.concurrency ?? "4"],
});
try {
  const ns = "bench";
  await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  await stack.kube.apply({
    apiVersion: mdsApiVersion,
    kind: "Project",
    metadata: { name: "bench", namespace: ns },
    spec: { displayName: "bench", deletionPolicy: "Delete" },
  });
  const project = await waitFor("project Ready", 120_000, async () => {
    const p = await stack.kube.get(mdsApiVersion, "Project", ns, "bench");
    return isReady(p) ? p : undefined;
  });
  const projectId = String(project.status?.["id"]);
  record("operator RSS with one Project", `${await rssMb(operator)} MB`, "-");

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
    const provisioning = await serviceProvisioningMs(stack, projectId, Math.min(samples, 10));
    record("apply → Secret p50", ms(percentile(toSecret, 50)), "≤ 250 ms beyond provisioning");
    record("apply → Secret p99", ms(percentile(toSecret, 99)), "≤ 1 s beyond provisioning");
    record("apply → Ready p50 / p99", `${ms(percentile(toReady, 50))} / ${ms(percentile(toReady, 99))}`, "-");
    record(
      "service alone: POST → ready p50 / p99",
      `${ms(percentile(provisioning, 50))} / ${ms(percentile(provisioning, 99))}`,
      "(reference)",
    );
    for (let i = 0; i < samples; i++) await stack.kube.remove(mdsApiVersion, "Database", ns, `lat-${i}`);
    await waitFor("latency databases deleted", 120_000, async () => (await countReady(stack, ns)).total === 0, 500);
  }

  // 2. Time for N Databases to become Ready (cumulative: each size adds to the previous one).
  let created = 0;
  let lastN = 0;
  for (const n of sizes) {
    console.log(`\n2. ${n} Databases to Ready`);
    const names = Array.from({ length: n - created }, (_, k) => `db-${created + k}`);
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
      1000,
    );
    const seconds = (now() - t0) / 1000;
    process.stdout.write("\n");
    record(
      `${n - lastN} new Databases Ready (${n} total)`,
      `${seconds.toFixed(1)} s (applies took ${(applied / 1000).toFixed(1)} s)`,
      n <= 100 ? "100 ≤ 10 s" : "1,000 ≤ 90 s",
    );
    lastN = n;
    const during = stack.apiProxy.stats();
    record(
      `API calls while ${n - (created - names.length)} became Ready`,
      `${during.total}, ${(during.total / (n - (created - names.length))).toFixed(2)} per create (${Object.entries(
        during.byRoute,
      )
        .map(([r, c]) => `${r} ×${c}`)
        .join(", ")}); peak ${Math.max(0, ...Object.values(during.peakPerSecondByCredential))}/s`,
      "-",
    );

    // 3. One steady-state resync: API calls and Kubernetes writes, counted while the harness is quiet.
    console.log(`\n3. steady-state resync at N = ${n} (window ${resyncSeconds} s + 5 s)`);
    await sleep(5_000);
    stack.apiProxy.resetStats();
    stack.kubeRequests.reset();
    await sleep((resyncSeconds + 5) * 1000);
    const api = stack.apiProxy.stats();
    const kube = stack.kubeRequests.counts();
    record(
      `API calls in one resync at N = ${n}`,
      `${api.total} (${Object.entries(api.byRoute)
        .map(([r, c]) => `${r} ×${c}`)
        .join(", ")})`,
      `≤ ⌈N/100⌉ + 5 = ${Math.ceil(n / 100) + 5}`,
    );
    record(
      `Kubernetes writes in one resync at N = ${n}`,
      `${kube.writes}${
        kube.writes > 0
          ? ` (${Object.entries(kube.writesByPath)
              .map(([p, c]) => `${p} ×${c}`)
              .slice(0, 5)
              .join(", ")})`
          : ""
      }`,
      "0",
    );
    record(`operator RSS at ${n} Databases`, `${await rssMb(operator)} MB`, n >= 1000 ? "-" : "-");
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
    record(`converged after a ${outageSeconds} s outage`, `${((now() - t0) / 1000).toFixed(1)} s`, "≤ 60 s");
    record(
      "peak API requests per second after recovery (one credential)",
      `${Math.max(0, ...Object.values(stats.peakPerSecondByCredential))}`,
      "≤ budget: 10/s sustained, burst 20 (≤ 30 in any second)",
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
      2000,
    );
    await sleep(10_000);
    record(`operator RSS at ${rssObjects} Databases (${created} live)`, `${await rssMb(operator)} MB`, "≤ 150 MB");
  }
} finally {
  console.log("\n| metric | result | target |\n|---|---|---|");
  for (const r of results) console.log(`| ${r.metric} | ${r.value} | ${r.target} |`);
  await stack.stop();
  if (!values.keep) await rm(dir, { recursive: true, force: true });
}
process.exit(0);
