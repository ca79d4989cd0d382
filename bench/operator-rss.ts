// `node bench/operator-rss.ts [--objects 1000] [--live N] [--settle 15] [--no-leader-elect] [--node-flags=a,b]
//    [--keep] [--heap-snapshot]`
// The operator's memory at N Databases in steady state. devkube runs in this process; the operator runs in a
// child process (this file with --child) built by createOperator with the in-memory fake API at the
// external-client seam (createApiClient) and otherwise `mds operator`'s own runtime, because N real PostgreSQL databases do not fit on this machine at
// 10,000. Everything on the Kubernetes side is real: N Database objects, the N connection Secrets the operator
// writes, their finalizers and statuses, all cached by the operator's informers. The child prints its RSS and
// heap (after a full GC) once every Database is Ready and the queues are quiet.
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    objects: { type: "string", default: "1000" },
    /**
     * How many of them are live (created remotely, with a Secret); the rest carry mds.dev/paused: cached and
     * reconciled once (status ReconcilePaused) but never created. Default: all live. This machine (2 cores shared,
     * devkube in the same process as this harness) makes a fully live 10,000 take over half an hour.
     */
    live: { type: "string" },
    /** Leader election on (the default, as deployed); off when the machine is too loaded to renew within 10 s. */
    "no-leader-elect": { type: "boolean", default: false },
    settle: { type: "string", default: "15" },
    keep: { type: "boolean", default: false },
    "heap-snapshot": { type: "boolean", default: false },
    child: { type: "string" },
    /** Extra Node flags for the operator process, e.g. "--max-semi-space-size=4" (comma-separated). */
    "node-flags": { type: "string", default: "" },
  },
});

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
const credentials = { secretNamespace: "mds-system", secretName: "mds-credentials", key: "token" };

if (values.child !== undefined) await runChild(values.child);
else await runParent();

/** The operator process: `mds operator`'s runtime (config, leader election, health and metrics server), the fake API. */
async function runChild(kubeconfigPath: string): Promise<void> {
  // As `mds operator` does (src/cli/main.ts): the heap flags before anything else is loaded.
  if (process.env["MDS_BENCH_DEFAULT_HEAP"] !== "1") (await import("../src/cli/heap-flags.ts")).limitHeapGrowth();
  const { default: pino } = await import("pino");
  const { createLogger, loadKubeConfig, startOperatorRuntime } = await import("../src/cli/operator.ts");
  const { parseOperatorConfig } = await import("../src/cli/operator-config.ts");
  const { createOperator } = await import("../src/operator/index.ts");
  const { createFakeApi } = await import("../src/operator/testing/fake-api.ts");
  const api = createFakeApi();
  api.provisioningReads = 0;
  // A starved event loop is what costs a leader its lease: report the worst stall too.
  const { monitorEventLoopDelay } = await import("node:perf_hooks");
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  const config = parseOperatorConfig(
    ["--kubeconfig", kubeconfigPath, "--api-url", "http://fake.invalid", "--instance-id", "bench", "--metrics-address", "127.0.0.1:0", "--log-level", "warn", ...(process.env["MDS_BENCH_LEADER_ELECT"] === "0" ? ["--no-leader-elect"] : [])],
    {},
  );
  if (config === "help") throw new Error("unexpected help");
  const runtime = await startOperatorRuntime(config, {
    kubeConfig: loadKubeConfig(config, false, {}),
    logger: createLogger("warn", pino.destination(2)),
    identity: "bench",
    createOperator: (options) => createOperator({ ...options, createApiClient: () => api }),
  });
  // The fake service lives in this process: its records (as JSON, a rough lower bound of their heap share) are
  // not the operator's memory.
  const fakeApiBytes = () =>
    JSON.stringify([...api.databases.values()]).length + JSON.stringify([...api.projects.values()]).length + JSON.stringify([...api.passwords]).length;
  const report = async () => {
    const before = process.memoryUsage();
    (globalThis as { gc?: () => void }).gc?.();
    // V8 hands freed pages back to the OS from a background task: give it a moment before reading RSS.
    await sleep(3_000);
    const m = process.memoryUsage();
    process.stdout.write(
      `${JSON.stringify({ rss: mb(m.rss), rssBeforeGc: mb(before.rss), heapUsedBeforeGc: mb(before.heapUsed), heapTotalBeforeGc: mb(before.heapTotal), heapUsed: mb(m.heapUsed), heapTotal: mb(m.heapTotal), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers), databases: api.databases.size, fakeApiJson: mb(fakeApiBytes()), eventLoopMaxMs: Math.round(loopDelay.max / 1e6), eventLoopP99Ms: Math.round(loopDelay.percentile(99) / 1e6) })}\n`,
    );
  };
  process.on("SIGUSR1", () => void report());
  let stopping = false;
  process.on("SIGTERM", () => {
    stopping = true;
    void runtime.stop().then(() => process.exit(0));
  });
  // As `mds operator` does: a replica that lost its lease exits (the figures of a standby would mean nothing).
  void runtime.lost.then(() => {
    if (stopping) return;
    process.stderr.write("operator-rss: the operator lost its lease\n");
    process.exit(1);
  });
  await report();
}

async function runParent(): Promise<void> {
  const n = Number(values.objects);
  const settleMs = Number(values.settle) * 1000;
  const { parse } = await import("yaml");
  const { startDevkube } = await import("../src/devkube/index.ts");
  const { createKubeObjects } = await import("../src/testing/kube-objects.ts");
  const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-rss-"));
  console.log(`operator-rss: ${n} Databases, state in ${dir}`);
  const devkube = await startDevkube({ dir: path.join(dir, "devkube") });
  const kube = createKubeObjects(devkube.kubeconfigPath);
  for (const file of (await readdir(path.join(repoRoot, "crds"))).filter((f) => f.endsWith(".yaml")).sort()) {
    await kube.apply(parse(await readFile(path.join(repoRoot, "crds", file), "utf8")));
  }
  for (let i = 0; i < 200; i++) {
    if (await kube.list("mds.dev/v1alpha1", "Database", "default").then(() => true, () => false)) break;
    await sleep(100);
  }
  for (const name of [credentials.secretNamespace, "bench"]) await kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
  await kube.apply({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: credentials.secretName, namespace: credentials.secretNamespace },
    data: { token: Buffer.from("bench-token-not-used-by-the-fake").toString("base64") },
  });
  // Unrelated Secrets the operator must not cache (its Secret informer is label-selected).
  for (let i = 0; i < 50; i++) {
    await kube.apply({ apiVersion: "v1", kind: "Secret", metadata: { name: `unrelated-${i}`, namespace: "bench" }, data: { x: Buffer.alloc(2048).toString("base64") } });
  }
  await kube.apply({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "bench", namespace: "bench" },
    spec: { displayName: "bench", deletionPolicy: "Delete" },
  });

  const node = process.execPath;
  const child = spawn(
    node,
    ["--expose-gc", ...(values["node-flags"] ?? "").split(",").filter((f) => f !== ""), ...(values["heap-snapshot"] ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`] : []), fileURLToPath(import.meta.url), "--child", devkube.kubeconfigPath],
    { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, MDS_BENCH_LEADER_ELECT: values["no-leader-elect"] ? "0" : "1" } },
  );
  let exited = false;
  child.once("exit", () => (exited = true));
  let last: Record<string, number> | undefined;
  let buffered = "";
  child.stdout.on("data", (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      last = JSON.parse(buffered.slice(0, nl)) as Record<string, number>;
      buffered = buffered.slice(nl + 1);
    }
  });
  const sample = async () => {
    last = undefined;
    child.kill("SIGUSR1");
    for (let i = 0; i < 200 && last === undefined; i++) await sleep(100);
    return last;
  };
  try {
    for (let i = 0; i < 300 && last === undefined; i++) await sleep(100);
    console.log(`  operator started: ${JSON.stringify(last)}`);
    const t0 = performance.now();
    const live = Math.min(n, Number(values.live ?? n));
    // Created through src/kube's client (one POST each, 32 in flight): client-node's apply is a read and a write.
    const { createKubeClient } = await import("../src/kube/client.ts");
    const { parseKubeConfig } = await import("../src/kube/kubeconfig.ts");
    const { DatabaseType } = await import("../src/resources/types.ts");
    const writer = createKubeClient(parseKubeConfig(devkube.kubeconfig));
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < n) {
          const k = next++;
          const name = `db-${k}`;
          await writer.create(DatabaseType, {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Database",
            metadata: { name, namespace: "bench", ...(k < live ? {} : { annotations: { "mds.dev/paused": "true" } }) },
            spec: { projectRef: { name: "bench" }, deletionPolicy: "Delete", connectionSecret: { name: `${name}-conn` } },
          });
        }
      }),
    );
    console.log(`  applied ${n} Databases (${live} live, ${n - live} paused) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    for (;;) {
      // Paginated and every 10 s: listing 10,000 objects at once starves devkube, which shares this process.
      let settled = 0;
      let cont: string | undefined;
      do {
        const page = await writer.list(DatabaseType, { namespace: "bench", limit: 500, continue: cont });
        for (const d of page.items) {
          const conds = (d["status"] as { conditions?: Array<{ type: string; status: string; reason?: string }> } | undefined)?.conditions ?? [];
          if (conds.some((c) => (c.type === "Ready" && c.status === "True") || c.reason === "ReconcilePaused")) settled++;
        }
        cont = page.metadata.continue || undefined;
      } while (cont !== undefined);
      if (settled >= n) break;
      if (exited) throw new Error("the operator process exited");
      console.log(`  ${settled}/${n} Ready or paused after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      await sleep(10_000);
    }
    console.log(`  all ${n} Ready (or paused) after ${((performance.now() - t0) / 1000).toFixed(1)} s; settling ${settleMs / 1000} s`);
    await sleep(settleMs);
    const status = await readFile(`/proc/${child.pid}/status`, "utf8");
    const rssBeforeGc = mb(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024);
    const smaps = await readFile(`/proc/${child.pid}/smaps_rollup`, "utf8").catch(() => "");
    const anon = mb(Number(/Anonymous:\s+(\d+)/.exec(smaps)?.[1] ?? NaN) * 1024);
    console.log(`  of which anonymous memory ${anon} MB`);
    const m = await sample();
    console.log(`operator at ${n} Databases: RSS ${rssBeforeGc} MB (steady state), after a full GC ${JSON.stringify(m)}`);
    if (values["heap-snapshot"]) {
      child.kill("SIGUSR2");
      await sleep(5_000 + n);
      console.log(`  heap snapshot written to ${dir}`);
    }
  } finally {
    if (!exited) {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
    await devkube.stop();
    if (!values.keep && !values["heap-snapshot"]) await rm(dir, { recursive: true, force: true });
  }
  process.exit(0);
}
