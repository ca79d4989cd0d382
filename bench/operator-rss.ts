// `node bench/operator-rss.ts [--objects 1000] [--live N] [--namespaces 1] [--settle 15] [--no-leader-elect]
//    [--node-flags=a,b] [--keep] [--heap-snapshot] [--dist DIR] [--resync SECONDS] [--restart]`
// The operator's memory at N Databases in steady state. devkube runs in this process; the operator runs in a
// child process (operator-rss-child.mjs): `mds operator`'s runtime compiled as the image ships it, built by
// createOperator with the in-memory fake API at the external-client seam (createApiClient), served from this process
// over IPC (api-over-ipc.ts) so the child's RSS is the operator's alone, because N real PostgreSQL databases do not
// fit on this machine at 10,000. Everything on the Kubernetes side is real: N Database objects, the N connection Secrets the operator
// writes, their finalizers and statuses, all cached by the operator's informers. The child prints its RSS and
// heap (after a full GC) once every Database is Ready and the queues are quiet.
import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    objects: { type: "string", default: "1000" },
    /**
     * How many of them are live (created remotely, with a Secret); the rest carry mds.dev/paused: cached and
     * reconciled once (status ReconcilePaused) but never created. Default: all live.
     */
    live: { type: "string" },
    /**
     * Spread over this many namespaces (bench-0, bench-1, …; one Project each), as teams would be (100
     * in the cold-start bench). Default 1: the namespace "bench".
     */
    namespaces: { type: "string", default: "1" },
    /** Leader election on (the default, as deployed); off when the machine is too loaded to renew within 10 s. */
    "no-leader-elect": { type: "boolean", default: false },
    settle: { type: "string", default: "15" },
    keep: { type: "boolean", default: false },
    "heap-snapshot": { type: "boolean", default: false },
    /**
     * The operator's resync interval (its --poll-slow); with it, after the RSS, one steady-state resync is counted:
     * API calls (at the fake service) and Kubernetes writes (devkube's request log) in one interval (default 60 s;
     * the deployed default is 5 min).
     */
    resync: { type: "string", default: "60" },
    /** A compiled dist/ directory to run (default: src/ compiled into a temporary directory first, as the image does). */
    dist: { type: "string" },
    /** Extra Node flags for the operator process, e.g. "--max-semi-space-size=4" (comma-separated). */
    "node-flags": { type: "string", default: "" },
    /**
     * After the resync: stop the operator and start a new one in front of everything it left, and count what the
     * cold start costs until every Database is confirmed. Exits 1 when a target is missed.
     */
    restart: { type: "boolean", default: false },
    /** Environment over the image's for the operator process, e.g. "MALLOC_MMAP_THRESHOLD_=32768" (comma-separated). */
    env: { type: "string", default: "" },
  },
});

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
const credentials = { secretNamespace: "mds-system", secretName: "mds-credentials", key: "token" };
const namespaceCount = Math.max(1, Number(values.namespaces));
const benchNamespaces =
  namespaceCount === 1 ? ["bench"] : Array.from({ length: namespaceCount }, (_, i) => `bench-${i}`);
/**
 * This process's event loop (devkube and the fake service run here): a stall here delays the operator's Lease
 * renewals from outside, so each phase reports it next to the operator's own (eventLoopMaxMs of the child).
 */
const harnessLoop = monitorEventLoopDelay({ resolution: 20 });
harnessLoop.enable();
const harnessStall = () => {
  const ms = Math.round(harnessLoop.max / 1e6);
  harnessLoop.reset();
  return `harness (devkube + fake service) event loop max ${ms} ms`;
};

await runParent();

/**
 * src/ compiled as the Dockerfile does (tsc -p tsconfig.build.json, then the operator's entry bundled by
 * scripts/bundle-operator.ts), into `outDir`; resolved from the repository.
 */
async function compile(outDir: string): Promise<string> {
  const { execFileSync } = await import("node:child_process");
  const started = performance.now();
  execFileSync(
    process.execPath,
    [
      path.join(repoRoot, "node_modules/typescript/bin/tsc"),
      "-p",
      path.join(repoRoot, "tsconfig.build.json"),
      "--outDir",
      outDir,
      "--sourceMap",
      "false",
    ],
    { stdio: "inherit" },
  );
  // Compiled files import their dependencies from the repository's node_modules, and need its "type": "module"; the
  // bundle resolves the npm packages it takes in from there too (linked first).
  await symlink(path.join(repoRoot, "node_modules"), path.join(outDir, "node_modules"));
  const { bundleOperator } = await import("../scripts/bundle-operator.ts");
  await bundleOperator(outDir);
  await copyFile(path.join(repoRoot, "package.json"), path.join(outDir, "package.json"));
  console.log(`  compiled src/ into ${outDir} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return outDir;
}

/** The glibc malloc settings the image runs with (the Dockerfile's `ENV MALLOC_…` line). */
async function imageMallocEnv(): Promise<Record<string, string>> {
  const line = /^ENV (MALLOC_.+)$/m.exec(await readFile(path.join(repoRoot, "Dockerfile"), "utf8"))?.[1] ?? "";
  return Object.fromEntries(
    line
      .split(/\s+/)
      .filter((kv) => kv.includes("="))
      .map((kv) => kv.split("=") as [string, string]),
  );
}

/**
 * One steady-state resync: every settled object is reconciled again and the remote mirror lists everything once.
 * Counted over one interval while this harness is quiet; Lease renewals (leader election) are reported apart.
 */
async function countOneResync(
  seconds: number,
  n: number,
  calls: Record<string, number>,
  kubeRequests: { reset(): void; counts(): { byMethod: Record<string, number>; writesByPath: Record<string, number> } },
): Promise<number> {
  const before = { ...calls };
  kubeRequests.reset();
  await sleep(seconds * 1000);
  const apiCalls = Object.entries(calls)
    .map(([op, c]) => [op, c - (before[op] ?? 0)] as const)
    .filter(([, c]) => c > 0);
  const total = apiCalls.reduce((a, [, c]) => a + c, 0);
  const lists = Object.fromEntries(apiCalls)["listProjects"] ?? 0;
  const writes = Object.entries(kubeRequests.counts().writesByPath);
  const leaseWrites = writes.filter(([p]) => p.includes("/leases")).reduce((a, [, c]) => a + c, 0);
  const otherWrites = writes.filter(([p]) => !p.includes("/leases"));
  console.log(
    `  one resync interval (${seconds} s) at N = ${n}: ${total} API calls (${apiCalls.map(([op, c]) => `${op} ×${c}`).join(", ")}; ${lists} full list(s)), target ≤ ⌈N/100⌉ + 5 = ${Math.ceil(n / 100) + 5} per resync`,
  );
  console.log(
    `  Kubernetes writes in it: ${otherWrites.reduce((a, [, c]) => a + c, 0)}${otherWrites.length > 0 ? ` (${otherWrites.map(([p, c]) => `${p} ×${c}`).join(", ")})` : ""} (target 0), besides ${leaseWrites} Lease renewals`,
  );
  return (total <= Math.ceil(n / 100) + 5 ? 0 : 1) + (otherWrites.length === 0 ? 0 : 1);
}

/** The process's RSS by what is mapped: the node binary, other files, glibc's heap, anonymous (V8's heap and the rest). */
async function rssByMapping(pid: number): Promise<string> {
  const text = await readFile(`/proc/${pid}/smaps`, "utf8").catch(() => "");
  const by: Record<string, number> = {};
  let name = "";
  for (const line of text.split("\n")) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const file = header[1] ?? "";
      name =
        file === ""
          ? "anonymous"
          : file.startsWith("[")
            ? file
            : file.endsWith("/node")
              ? "node binary"
              : "other files";
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) by[name] = (by[name] ?? 0) + Number(rss[1]);
  }
  return Object.entries(by)
    .sort((a, b) => b[1] - a[1])
    .map(([k, kb]) => `${k} ${mb(kb * 1024)} MB`)
    .join(", ");
}

async function runParent(): Promise<void> {
  const n = Number(values.objects);
  const settleMs = Number(values.settle) * 1000;
  const { parse } = await import("yaml");
  const { startDevkube } = await import("@mds/devkube");
  const { createKubeObjects } = await import("../test/support/kube-objects.ts");
  const dir = await mkdtemp(path.join(tmpdir(), "mds-bench-rss-"));
  console.log(`operator-rss: ${n} Databases, state in ${dir}`);
  const { default: pino } = await import("pino");
  const { createRequestCounter } = await import("../test/support/chaos/stack.ts");
  const kubeRequests = createRequestCounter();
  const devkube = await startDevkube({
    dir: path.join(dir, "devkube"),
    logger: pino({ level: "debug" }, kubeRequests.stream),
  });
  const kube = createKubeObjects(devkube.kubeconfigPath);
  for (const file of (await readdir(path.join(repoRoot, "crds"))).filter((f) => f.endsWith(".yaml")).sort()) {
    await kube.apply(parse(await readFile(path.join(repoRoot, "crds", file), "utf8")));
  }
  for (let i = 0; i < 200; i++) {
    if (
      await kube.list("mds.dev/v1alpha1", "Database", "default").then(
        () => true,
        () => false,
      )
    )
      break;
    await sleep(100);
  }
  for (const name of [credentials.secretNamespace, "bench", ...benchNamespaces])
    await kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
  await kube.apply({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: credentials.secretName, namespace: credentials.secretNamespace },
    data: { token: Buffer.from("bench-token-not-used-by-the-fake").toString("base64") },
  });
  // Unrelated Secrets the operator must not cache (its Secret informer is label-selected).
  for (let i = 0; i < 50; i++) {
    await kube.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: `unrelated-${i}`, namespace: "bench" },
      data: { x: Buffer.alloc(2048).toString("base64") },
    });
  }
  for (const namespace of benchNamespaces) {
    await kube.apply({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "bench", namespace },
      spec: { displayName: namespace, deletionPolicy: "Delete" },
    });
  }

  const { createFakeApi } = await import("../test/support/fake-api.ts");
  const { serveApi } = await import("./api-over-ipc.ts");
  const api = createFakeApi();
  api.provisioningReads = 0;
  const distDir = values.dist ?? (await compile(path.join(dir, "dist")));
  // The operator connects as it does in a pod (in-cluster config: a service-account token and CA on disk,
  // KUBERNETES_SERVICE_HOST/PORT), not from a kubeconfig file: a kubeconfig file would load the YAML parser, which
  // the shipped operator never loads.
  const serviceAccountDir = path.join(dir, "serviceaccount");
  const kubeconfig = parse(devkube.kubeconfig) as {
    clusters: { cluster: { "certificate-authority-data": string } }[];
  };
  await mkdir(serviceAccountDir, { mode: 0o700 });
  await writeFile(path.join(serviceAccountDir, "token"), devkube.token, { mode: 0o600 });
  const caData = kubeconfig.clusters[0]?.cluster["certificate-authority-data"] ?? "";
  await writeFile(path.join(serviceAccountDir, "ca.crt"), Buffer.from(caData, "base64"));
  const devkubeUrl = new URL(devkube.url);
  type Report = Record<string, number> & { healthUrl?: string };
  type Child = {
    proc: ReturnType<typeof spawn>;
    exited: () => boolean;
    /** The report the child prints once started (RSS, heap, its /metrics URL). */
    started: Promise<Report>;
    sample: () => Promise<Report>;
  };
  const startChild = (): Child => {
    const proc = spawn(
      process.execPath,
      [
        "--expose-gc",
        ...(values["node-flags"] ?? "").split(",").filter((f) => f !== ""),
        ...(values["heap-snapshot"] ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`] : []),
        path.join(repoRoot, "bench/operator-rss-child.mjs"),
        distDir,
        devkube.kubeconfigPath,
      ],
      {
        stdio: ["ignore", "pipe", "inherit", "ipc"],
        env: {
          ...process.env,
          ...mallocEnv,
          ...Object.fromEntries(
            (values.env ?? "")
              .split(",")
              .filter((kv) => kv.includes("="))
              .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
          ),
          KUBERNETES_SERVICE_HOST: devkubeUrl.hostname,
          KUBERNETES_SERVICE_PORT: devkubeUrl.port,
          MDS_BENCH_SERVICE_ACCOUNT_DIR: serviceAccountDir,
          MDS_BENCH_LEADER_ELECT: values["no-leader-elect"] ? "0" : "1",
          MDS_BENCH_POLL_SLOW: `${values.resync}s`,
        },
      },
    );
    serveApi(proc, api);
    let exited = false;
    proc.once("exit", () => (exited = true));
    let last: Report | undefined;
    let buffered = "";
    let onStarted: (r: Report) => void = () => undefined;
    const started = new Promise<Report>((resolve, reject) => {
      onStarted = resolve;
      proc.once("exit", () => reject(new Error("the operator process exited")));
    });
    started.catch(() => undefined);
    proc.stdout?.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        last = JSON.parse(buffered.slice(0, nl)) as Report;
        onStarted(last);
        buffered = buffered.slice(nl + 1);
      }
    });
    return {
      proc,
      exited: () => exited,
      started,
      sample: async () => {
        last = undefined;
        proc.kill("SIGUSR1");
        for (let i = 0; i < 200 && last === undefined; i++) await sleep(100);
        if (last === undefined) throw new Error("the operator process did not report");
        return last;
      },
    };
  };
  const mallocEnv = await imageMallocEnv();
  let current = startChild();
  const stopChild = async (c: Child) => {
    if (c.exited()) return;
    c.proc.kill("SIGTERM");
    await new Promise((r) => c.proc.once("exit", r));
  };
  const last = await current.started;
  const exited = () => current.exited();
  let missed = 0;

  /**
   * A cold start in front of everything the previous operator left: a new operator process, and
   * from its start until every Database was reconciled once and its queue is empty ("all confirmed", read from its
   * /metrics), the API calls (the fake counts each page of a list), per-object GETs, and the Kubernetes writes (Secrets,
   * statuses) at devkube. Nothing changed while it was down, so every write is one too many.
   */
  const restart = async (n: number): Promise<void> => {
    console.log(`\n  restart: a new operator process in front of ${n} settled Databases`);
    const before = { ...api.calls };
    kubeRequests.reset();
    harnessStall();
    const t0 = performance.now();
    current = startChild();
    const { healthUrl } = await current.started;
    if (healthUrl === undefined) throw new Error("the operator process did not report its /metrics URL");
    const sum = (text: string, metric: string, label: string) =>
      text
        .split("\n")
        .filter((l) => l.startsWith(`${metric}{`) && l.includes(label))
        .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    let confirmedMs = NaN;
    for (;;) {
      const text = await (await fetch(`${healthUrl}/metrics`)).text();
      // Reconciles of Databases since the start, and keys ready to run (workqueue_depth; mds_operator_queue_depth
      // also counts the resyncs scheduled for later).
      const reconciled = sum(text, "mds_operator_reconcile_duration_seconds_count", 'kind="Database"');
      if (reconciled >= n && sum(text, "workqueue_depth", 'name="database"') === 0) {
        confirmedMs = performance.now() - t0;
        break;
      }
      if (current.exited()) throw new Error("the operator process exited");
      await sleep(500);
    }
    await sleep(5_000);
    const calls = Object.entries(api.calls)
      .map(([op, c]) => [op, c - (before[op] ?? 0)] as const)
      .filter(([, c]) => c > 0);
    const lists = calls.filter(([op]) => op.startsWith("list")).reduce((a, [, c]) => a + c, 0);
    const gets = calls.filter(([op]) => op.startsWith("get")).reduce((a, [, c]) => a + c, 0);
    const writes = Object.entries(kubeRequests.counts().writesByPath).filter(([p]) => !p.includes("/leases"));
    const secretWrites = writes.filter(([p]) => p.includes("/secrets")).reduce((a, [, c]) => a + c, 0);
    const statusWrites = writes.filter(([p]) => p.endsWith("/status")).reduce((a, [, c]) => a + c, 0);
    const otherWrites = writes.reduce((a, [, c]) => a + c, 0) - secretWrites - statusWrites;
    const listTarget = Math.ceil(n / 100) + 5;
    const check = (ok: boolean) => {
      if (!ok) missed++;
      return ok ? "met" : "MISSED";
    };
    console.log(
      `  all ${n} confirmed ${(confirmedMs / 1000).toFixed(1)} s after the process started; API calls until 5 s later: ${calls.map(([op, c]) => `${op} ×${c}`).join(", ")}`,
    );
    console.log(`  list calls: ${lists} (target ≤ ⌈N/100⌉ + 5 = ${listTarget}: ${check(lists <= listTarget)})`);
    console.log(`  per-object GETs: ${gets} (target 0: ${check(gets === 0)})`);
    const after = await current.sample();
    console.log(
      `  the new operator process since its start: event loop max ${after["eventLoopMaxMs"]} ms, p99 ${after["eventLoopP99Ms"]} ms, RSS ${after["rss"]} MB after a full GC; ${harnessStall()}`,
    );
    console.log(`  Secrets written: ${secretWrites} (target 0: ${check(secretWrites === 0)})`);
    console.log(`  statuses written: ${statusWrites} (target 0: ${check(statusWrites === 0)})`);
    console.log(
      `  other Kubernetes writes: ${otherWrites}${otherWrites > 0 ? ` (${writes.map(([p, c]) => `${p} ×${c}`).join(", ")})` : ""} (target 0: ${check(otherWrites === 0)})`,
    );
  };
  const sample = () => current.sample();
  try {
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
            metadata: {
              name,
              namespace: benchNamespaces[k % benchNamespaces.length],
              ...(k < live ? {} : { annotations: { "mds.dev/paused": "true" } }),
            },
            spec: {
              projectRef: { name: "bench" },
              deletionPolicy: "Delete",
              connectionSecret: { name: `${name}-conn` },
            },
          });
        }
      }),
    );
    console.log(
      `  applied ${n} Databases (${live} live, ${n - live} paused) in ${benchNamespaces.length} namespace(s) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    for (;;) {
      // Paginated and every 10 s: listing 10,000 objects at once starves devkube, which shares this process.
      let settled = 0;
      let cont: string | undefined;
      do {
        const page = await writer.list(DatabaseType, { limit: 500, continue: cont });
        for (const d of page.items) {
          const conds =
            (d["status"] as { conditions?: Array<{ type: string; status: string; reason?: string }> } | undefined)
              ?.conditions ?? [];
          if (conds.some((c) => (c.type === "Ready" && c.status === "True") || c.reason === "ReconcilePaused"))
            settled++;
        }
        cont = page.metadata.continue || undefined;
      } while (cont !== undefined);
      if (settled >= n) break;
      if (exited()) throw new Error("the operator process exited");
      console.log(`  ${settled}/${n} Ready or paused after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
      await sleep(10_000);
    }
    console.log(
      `  all ${n} Ready (or paused) after ${((performance.now() - t0) / 1000).toFixed(1)} s; ${harnessStall()}; settling ${settleMs / 1000} s`,
    );
    await sleep(settleMs);
    const status = await readFile(`/proc/${current.proc.pid}/status`, "utf8");
    const rssBeforeGc = mb(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) * 1024);
    const smaps = await readFile(`/proc/${current.proc.pid}/smaps_rollup`, "utf8").catch(() => "");
    const anon = mb(Number(/Anonymous:\s+(\d+)/.exec(smaps)?.[1] ?? NaN) * 1024);
    console.log(`  of which anonymous memory ${anon} MB; by mapping: ${await rssByMapping(current.proc.pid ?? 0)}`);
    const m = await sample();
    console.log(
      `operator at ${n} Databases: RSS ${rssBeforeGc} MB (steady state), after a full GC ${JSON.stringify(m)}`,
    );
    harnessStall();
    missed += await countOneResync(Number(values.resync), n, api.calls, kubeRequests);
    console.log(`  during the resync: ${harnessStall()}`);
    if (values["heap-snapshot"]) {
      current.proc.kill("SIGUSR2");
      await sleep(5_000 + n);
      console.log(`  heap snapshot written to ${dir}`);
    }
    if (values.restart) {
      await stopChild(current);
      await restart(n);
    }
  } finally {
    await stopChild(current);
    await devkube.stop();
    if (!values.keep && !values["heap-snapshot"]) await rm(dir, { recursive: true, force: true });
  }
  process.exit(missed > 0 ? 1 : 0);
}
