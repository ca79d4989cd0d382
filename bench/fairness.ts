// `node bench/fairness.ts [--burst 1000] [--probes 5] [--orders fifo,namespaces] [--spares 64] [--shared-token]
//    [--dist DIR] [--no-leader-elect] [--keep]`
// Fairness between teams: team A applies a burst of N Databases at once; while it runs, team B
// applies one Database at a time ("probes"), each next to one database created directly at the service with B's
// token at the same moment: the service's own create→ready time under the same load. B's figure is its apply→Ready
// time minus that service time, p99 over the probes; target ≤ 2 s with the operator's queue serving namespaces in
// turn. The same run repeats it with the old arrival order (MDS_QUEUE_ORDER=fifo) for the before/after ratio.
//
// The operator runs as shipped (bench/shipped-operator.ts: dist/, the image's environment, production poll intervals
// and concurrency, leader election on); the service keeps its production spare pool (64). Each team has its own
// workspace token, as docs/many-teams.md prescribes (--shared-token: both use the operator's, so they also share
// one rate budget at the operator and one workspace at the service). Exits 1 when the target is missed.
import { now, percentile, waitFor } from "./timing.ts";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { startChaosStack, type ChaosStack, type OperatorProcess } from "../test/support/chaos/stack.ts";
import { mdsApiVersion } from "../test/support/chaos/invariants.ts";
import { isReady, type KubeObject } from "../test/support/kube-objects.ts";
import { createServiceToken } from "../src/service/domain/tokens.ts";
import { createPool } from "../src/service/store/pool.ts";
import { sparePrefix } from "../src/service/placement/provisioner.ts";
import { shippedOperator } from "./shipped-operator.ts";

const { values } = parseArgs({
  options: {
    burst: { type: "string", default: "1000" },
    /** Probes by team B per burst, one after another while the burst has Databases not Ready yet. */
    probes: { type: "string", default: "5" },
    /** Queue orders to measure, in this order, each with its own operator process and burst. */
    orders: { type: "string", default: "fifo,namespaces" },
    spares: { type: "string", default: "64" },
    "shared-token": { type: "boolean", default: false },
    dist: { type: "string" },
    "no-leader-elect": { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
  },
});
const burst = Number(values.burst);
const maxProbes = Number(values.probes);
const orders = (values.orders ?? "").split(",").filter((o) => o !== "");
for (const o of orders)
  if (o !== "fifo" && o !== "namespaces") throw new Error(`--orders: "${o}" is neither fifo nor namespaces`);
const targetMs = 2_000;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ");
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const database = (ns: string, name: string): KubeObject => ({
  apiVersion: mdsApiVersion,
  kind: "Database",
  metadata: { name, namespace: ns },
  spec: { projectRef: { name: "app" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } },
});

/** The service alone: one database created with `token` in `projectId`, create → ready, then deleted. */
async function serviceCreateMs(stack: ChaosStack, token: string, projectId: string, name: string): Promise<number> {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const t0 = now();
  const res = await fetch(`${stack.api.directUrl}/v1/projects/${projectId}/databases`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name }),
  });
  if (res.status >= 300) throw new Error(`direct create: HTTP ${res.status} ${await res.text()}`);
  const id = ((await res.json()) as { data: { id: string } }).data.id;
  await waitFor(
    "direct database ready",
    10 * 60_000,
    async () => {
      const r = await fetch(`${stack.api.directUrl}/v1/databases/${id}`, { headers });
      return ((await r.json()) as { data: { status: string } }).data.status === "ready";
    },
    20,
  );
  const ms = now() - t0;
  void fetch(`${stack.api.directUrl}/v1/databases/${id}`, { method: "DELETE", headers }).catch(() => undefined);
  return ms;
}

async function readyCount(stack: ChaosStack, ns: string): Promise<{ ready: number; total: number }> {
  const list = await stack.kube.list(mdsApiVersion, "Database", ns);
  return { ready: list.filter(isReady).length, total: list.length };
}

interface Probe {
  operatorMs: number;
  /** From the apply until B's status has the remote id: the queue's wait and the create call. */
  createdMs: number;
  serviceMs: number;
  aReadyAtB: number;
}

interface OrderResult {
  order: string;
  quiet: Probe[];
  probes: Probe[];
  appliesSeconds: number;
  burstSeconds: number;
  loadBefore: string;
  loadAfter: string;
}

const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-fairness-"));
console.log(`bench:fairness: state in ${dir}; load average ${load()}`);
const shipped = await shippedOperator(path.join(dir, "app"), values.dist);
console.log(
  `  operator from dist/ (${shipped.source}), env ${Object.entries(shipped.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ")}`,
);
const stack = await startChaosStack({
  dir,
  instanceId: "fair",
  logLevel: "info",
  pollFast: "1s",
  pollSlow: "5m",
  service: { spareDatabases: Number(values.spares) },
});
const results: OrderResult[] = [];
let operator: OperatorProcess | undefined;
let exitCode = 0;
try {
  if (stack.controlUrl === undefined) throw new Error("the stack does not expose the service's control database");
  const control = createPool(stack.controlUrl, 2);
  const tokenOf = async (workspace: string) =>
    values["shared-token"]
      ? stack.api.token
      : (await createServiceToken(control, { workspace, name: "bench-fairness" })).token;
  // The production spare pool, full before anything is measured (the service fills it when idle).
  const spares = async () =>
    Number(
      (
        await control.query<{ n: string }>("SELECT count(*) AS n FROM pg_database WHERE datname LIKE $1", [
          `${sparePrefix}%`,
        ])
      ).rows[0]!.n,
    );
  const sparesFull = async () => {
    const t0 = now();
    await waitFor(
      `${values.spares} spare databases`,
      20 * 60_000,
      async () => (await spares()) >= Number(values.spares),
      1000,
    );
    console.log(`  spare pool full (${await spares()}) after ${((now() - t0) / 1000).toFixed(0)} s`);
  };

  for (const [index, order] of orders.entries()) {
    const a = `team-a-${order}`;
    const b = `team-b-${order}`;
    console.log(
      `\n${order}: operator with MDS_QUEUE_ORDER=${order}; team A (${a}) bursts ${burst} Databases, team B (${b}) probes`,
    );
    operator = stack.startOperator({
      identity: `fair-${order}`,
      leaderElect: !values["no-leader-elect"],
      entry: shipped.entry,
      env: { ...shipped.env, MDS_QUEUE_ORDER: order },
    });
    const tokenB = await tokenOf(`${b}-ws`);
    for (const [ns, token] of [
      [a, await tokenOf(`${a}-ws`)],
      [b, tokenB],
    ] as const) {
      await stack.kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
      if (!values["shared-token"])
        await stack.kube.apply({
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "mds-credentials", namespace: ns },
          stringData: { token },
        } as KubeObject);
      await stack.kube.apply({
        apiVersion: mdsApiVersion,
        kind: "Project",
        metadata: { name: "app", namespace: ns },
        spec: { displayName: ns, deletionPolicy: "Delete" },
      });
    }
    const projectB = await waitFor("team B's project Ready", 300_000, async () => {
      const p = await stack.kube.get(mdsApiVersion, "Project", b, "app");
      return isReady(p) ? String(p?.status?.["id"]) : undefined;
    });
    await waitFor("team A's project Ready", 300_000, async () =>
      isReady(await stack.kube.get(mdsApiVersion, "Project", a, "app")),
    );

    let probeCount = 0;
    const probe = async (): Promise<Probe> => {
      const name = `probe-${probeCount++}`;
      const t0 = now();
      const [{ ready: operatorMs, created: createdMs }, serviceMs] = await Promise.all([
        (async () => {
          await stack.kube.apply(database(b, name));
          let created = NaN;
          await waitFor(
            `${b}/${name} Ready`,
            60 * 60_000,
            async () => {
              const o = await stack.kube.get(mdsApiVersion, "Database", b, name);
              if (Number.isNaN(created) && o?.status?.["id"] !== undefined) created = now() - t0;
              return isReady(o);
            },
            50,
          );
          return { ready: now() - t0, created };
        })(),
        serviceCreateMs(stack, tokenB, projectB, `direct-${name}`),
      ]);
      const aReadyAtB = (await readyCount(stack, a)).ready;
      await stack.kube.remove(mdsApiVersion, "Database", b, name);
      return { operatorMs, createdMs, serviceMs, aReadyAtB };
    };
    const show = (p: Probe) =>
      `B created after ${s(p.createdMs)}, Ready after ${s(p.operatorMs)}, the service alone ${s(p.serviceMs)}: ${s(p.operatorMs - p.serviceMs)} beyond it; ${p.aReadyAtB} of A's Ready by then; load ${load()}`;

    await sparesFull();
    const loadBefore = load();
    // Quiet: the same probe with no burst, for reference.
    const quiet: Probe[] = [];
    for (let i = 0; i < 2; i++) {
      quiet.push(await probe());
      console.log(`  quiet probe: ${show(quiet[quiet.length - 1]!)}`);
    }
    await sparesFull();

    // The burst: every one of A's Databases applied (16 at a time), then B's probes, one after another.
    const t0 = now();
    await inParallel(
      Array.from({ length: burst }, (_, i) => `burst-${i}`),
      16,
      async (name) => void (await stack.kube.apply(database(a, name))),
    );
    const appliesSeconds = (now() - t0) / 1000;
    console.log(`  ${burst} applied in ${appliesSeconds.toFixed(1)} s`);
    const probes: Probe[] = [];
    for (let i = 0; i < maxProbes; i++) {
      if (i > 0 && (await readyCount(stack, a)).ready >= burst) break;
      probes.push(await probe());
      console.log(`  probe ${i + 1}: ${show(probes[i]!)}`);
    }
    let seen = -1;
    await waitFor(
      `${burst} of A's Ready`,
      3 * 60 * 60_000,
      async () => {
        const c = await readyCount(stack, a);
        if (c.ready !== seen)
          process.stdout.write(
            `\r  ${(seen = c.ready)}/${burst} of A's Ready after ${Math.round((now() - t0) / 1000)} s   `,
          );
        return c.ready >= burst;
      },
      2000,
    );
    const burstSeconds = (now() - t0) / 1000;
    process.stdout.write("\n");
    results.push({ order, quiet, probes, appliesSeconds, burstSeconds, loadBefore, loadAfter: load() });

    if (index < orders.length - 1) {
      // The next order starts from the same state: A's burst deleted (remote databases too), this operator stopped.
      console.log(`  deleting A's ${burst} Databases`);
      await inParallel(
        Array.from({ length: burst }, (_, i) => `burst-${i}`),
        16,
        (name) => stack.kube.remove(mdsApiVersion, "Database", a, name),
      );
      await waitFor("A's burst deleted", 3 * 60 * 60_000, async () => (await readyCount(stack, a)).total === 0, 2000);
      await operator.kill("SIGTERM");
    }
  }
  await control.end();
} catch (err) {
  console.error(`bench:fairness failed: ${err instanceof Error ? err.message : String(err)}`);
  exitCode = 2;
} finally {
  const tokens = values["shared-token"] ? "one token for both teams" : "a token per team";
  console.log(`\nburst ${burst}, ${tokens}, spares ${values.spares}, operator ${shipped.source}\n`);
  console.log(
    "| queue order | B: beyond the service, p50 / p99 (n) | B apply → created at the service p50 / p99 | B apply → Ready p50 / p99 | service alone, same moments, p50 / p99 | A's Ready when B was (median) | quiet: beyond the service | A's burst Ready (applies) | load avg before → after |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const over = r.probes.map((p) => p.operatorMs - p.serviceMs);
    console.log(
      `| ${r.order} | ${s(percentile(over, 50))} / **${s(percentile(over, 99))}** (${r.probes.length}) | ${s(
        percentile(
          r.probes.map((p) => p.createdMs),
          50,
        ),
      )} / ${s(
        percentile(
          r.probes.map((p) => p.createdMs),
          99,
        ),
      )} | ${s(
        percentile(
          r.probes.map((p) => p.operatorMs),
          50,
        ),
      )} / ${s(
        percentile(
          r.probes.map((p) => p.operatorMs),
          99,
        ),
      )} | ${s(
        percentile(
          r.probes.map((p) => p.serviceMs),
          50,
        ),
      )} / ${s(
        percentile(
          r.probes.map((p) => p.serviceMs),
          99,
        ),
      )} | ${percentile(
        r.probes.map((p) => p.aReadyAtB),
        50,
      )} of ${burst} | ${r.quiet.map((p) => s(p.operatorMs - p.serviceMs)).join(", ")} | ${r.burstSeconds.toFixed(0)} s (${r.appliesSeconds.toFixed(0)} s) | ${r.loadBefore} → ${r.loadAfter} |`,
    );
  }
  const fair = results.find((r) => r.order === "namespaces");
  const fifo = results.find((r) => r.order === "fifo");
  const p99 = (r: OrderResult) =>
    percentile(
      r.probes.map((p) => p.operatorMs - p.serviceMs),
      99,
    );
  if (fair !== undefined && fifo !== undefined)
    console.log(`\nfifo / namespaces, p99 beyond the service: ${(p99(fifo) / Math.max(1, p99(fair))).toFixed(1)}×`);
  if (fair !== undefined) {
    const missed = !(p99(fair) <= targetMs);
    console.log(
      `target: team B's Database Ready ≤ ${s(targetMs)} beyond its service time, p99, while A's burst runs: ${missed ? "MISSED" : "met"} (${s(p99(fair))})`,
    );
    if (missed && exitCode === 0) exitCode = 1;
  }
  await stack.stop();
  if (!values.keep) await rm(dir, { recursive: true, force: true });
}
process.exit(exitCode);
