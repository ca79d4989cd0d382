// The operator process of bench/operator-rss.ts: `mds operator`'s runtime (config, leader election, health and
// metrics server) loaded from a compiled dist/ directory, as the container image runs it, with the fake service of
// the parent process at the external-client seam, over IPC. Plain JavaScript on purpose: a .ts entry point would
// load Node's type stripper (about 40 MB of RSS the shipped operator does not have).
// Usage (by the parent only): node --expose-gc operator-rss-child.mjs <dist dir> <kubeconfig>
import path from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

const [distDir, kubeconfigPath] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(path.join(distDir, file)).href);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes) => Math.round((bytes / 1024 / 1024) * 10) / 10;

// As `mds operator` does (src/cli/main.ts): the heap flags before anything else is loaded.
if (process.env.MDS_BENCH_DEFAULT_HEAP !== "1") (await load("cli/heap-flags.js")).limitHeapGrowth();
// Everything from the one module the image runs (dist/cli/operator.js, bundled by scripts/bundle-operator.ts): a
// module of dist/ besides it would load a second copy of what it imports.
const {
  createLogger,
  createOperatorWithKinds,
  inClusterKubeConfig,
  loadKubeConfig,
  parseOperatorConfig,
  startOperatorRuntime,
} = await load("cli/operator.js");

/** The MdsApi seam: every method is a message to the parent, answered with its result or error. */
function apiFromParent() {
  const pending = new Map();
  let next = 0;
  process.on("message", (reply) => {
    const call = pending.get(reply.id);
    if (call === undefined) return;
    pending.delete(reply.id);
    if (reply.error === undefined) call.resolve(reply.value);
    else
      call.reject(
        Object.assign(new Error(reply.error.message), { code: reply.error.code, status: reply.error.status }),
      );
  });
  process.channel?.unref();
  const noSignal = (a) => (typeof a === "object" && a !== null && "signal" in a ? { ...a, signal: undefined } : a);
  return new Proxy(
    {},
    {
      // Not a thenable: `await` on the proxy must not turn into a call.
      get: (_target, method) =>
        typeof method !== "string" || method === "then"
          ? undefined
          : (...args) =>
              new Promise((resolve, reject) => {
                const id = ++next;
                pending.set(id, { resolve, reject });
                process.send({ id, method, args: args.map(noSignal) });
              }),
    },
  );
}

const api = apiFromParent();
// A starved event loop is what costs a leader its lease: report the worst stall too.
const loopDelay = monitorEventLoopDelay({ resolution: 20 });
loopDelay.enable();
const config = parseOperatorConfig(
  [
    "--kubeconfig",
    kubeconfigPath,
    "--api-url",
    "http://fake.invalid",
    "--instance-id",
    "bench",
    "--credentials-fallback-namespaces",
    "*",
    "--metrics-address",
    "127.0.0.1:0",
    "--log-level",
    "warn",
    "--poll-slow",
    process.env.MDS_BENCH_POLL_SLOW ?? "5m",
    ...(process.env.MDS_BENCH_LEADER_ELECT === "0" ? ["--no-leader-elect"] : []),
  ],
  {},
);
const runtime = await startOperatorRuntime(config, {
  // In a pod's way (the parent wrote the service-account files) when given; a kubeconfig file loads the YAML parser.
  kubeConfig:
    process.env.MDS_BENCH_SERVICE_ACCOUNT_DIR === undefined
      ? loadKubeConfig(config, false, {})
      : inClusterKubeConfig({ env: process.env, serviceAccountDir: process.env.MDS_BENCH_SERVICE_ACCOUNT_DIR }),
  // To stderr (stdout carries the reports), through the bundle's own pino: importing pino here would load a second one.
  logger: createLogger("warn", { write: (line) => process.stderr.write(line) }),
  identity: "bench",
  createOperator: (options) => createOperatorWithKinds({ ...options, createApiClient: () => api }),
});
const report = async () => {
  const before = process.memoryUsage();
  globalThis.gc?.();
  // V8 hands freed pages back to the OS from a background task: give it a moment before reading RSS.
  await sleep(3_000);
  const m = process.memoryUsage();
  process.stdout.write(
    `${JSON.stringify({ rss: mb(m.rss), rssBeforeGc: mb(before.rss), heapUsedBeforeGc: mb(before.heapUsed), heapTotalBeforeGc: mb(before.heapTotal), heapUsed: mb(m.heapUsed), heapTotal: mb(m.heapTotal), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers), eventLoopMaxMs: Math.round(loopDelay.max / 1e6), eventLoopP99Ms: Math.round(loopDelay.percentile(99) / 1e6), healthUrl: runtime.healthUrl, internalModules: process.moduleLoadList.length, internalUndici: process.moduleLoadList.some((m) => m.includes("deps/undici")) })}\n`,
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
