import { mkdir } from "node:fs/promises";
import path from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import type { Devkube } from "@mds/devkube";
import { credentialsSecret, startStack, type OperatorProcess } from "../../../dev/stack.ts";
import { testServiceOptions } from "../test-service.ts";
import { startFaultProxy, type FaultProxy } from "../fault-proxy.ts";
import { startPublicApiEmulator, type EmulatorFaults, type PublicApiEmulator } from "../public-api-emulator/server.ts";
import { createKubeObjects, type KubeObjects } from "../kube-objects.ts";
import type { PlantedSecret } from "../secret-scan.ts";
import { startTcpProxy, type TcpProxy } from "../tcp-proxy.ts";

// The whole local stack for chaos runs and operator benchmarks: the product's stack (dev/stack.ts, as `mds dev`
// runs it: PostgreSQL and the service, devkube with the CRDs, the credentials Secret, operator child processes) with
// test settings (those of test-service.ts) and three seams: the fault proxy (and the public-API emulator, with
// `api: "emulator"`) in front of the service, and a TCP proxy in front of devkube (to cut watches). Operators start
// the way `mds operator` runs in a cluster, each logging to its own file.

export type { OperatorProcess };

export interface StartOperatorOptions {
  identity: string;
  leaderElect: boolean;
  /** MDS_CRASH_POINT: `<name>[:<count>]`, comma-separated. */
  crashPoint?: string;
  /** Extra flags, e.g. ["--poll-slow", "30s"]. */
  args?: string[];
  env?: Record<string, string>;
  /** The `mds` entry script (default bin/mds.js; see dev/stack.ts). */
  entry?: string;
}

export interface ChaosStack {
  dir: string;
  instanceId: string;
  api: { url: string; directUrl: string; token: string };
  /** The service's control database (superuser URL: never print it), when the service harness exposes it. */
  controlUrl: string | undefined;
  apiProxy: FaultProxy;
  /** Between the fault proxy and the service when started with `api: "emulator"`. */
  emulator: PublicApiEmulator | undefined;
  kubeProxy: TcpProxy;
  /** Requests devkube served (from its request log), by method; the harness's own requests count too. */
  kubeRequests: RequestCounter;
  devkube: Devkube;
  kube: KubeObjects;
  /** A kubeconfig that reaches devkube through kubeProxy (what operators use). */
  operatorKubeconfigPath: string;
  planted: PlantedSecret[];
  startOperator(options: StartOperatorOptions): OperatorProcess;
  leaseHolder(): Promise<string | undefined>;
  logFiles(): string[];
  stop(): Promise<void>;
}

export interface RequestCounter {
  stream: Writable;
  counts(): { total: number; writes: number; byMethod: Record<string, number>; writesByPath: Record<string, number> };
  reset(): void;
}

/** Counts devkube's debug "request" log lines; writes are POST, PUT, PATCH and DELETE. */
export function createRequestCounter(): RequestCounter {
  let byMethod: Record<string, number> = {};
  let writesByPath: Record<string, number> = {};
  let pending = "";
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      pending += chunk.toString("utf8");
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!line.includes('"msg":"request"')) continue;
        try {
          const entry = JSON.parse(line) as { method?: string; path?: string };
          const method = entry.method ?? "?";
          byMethod[method] = (byMethod[method] ?? 0) + 1;
          if (method !== "GET" && method !== "HEAD") {
            // Names and ids out, so writes group by resource type.
            const key = `${method} ${(entry.path ?? "").split("?")[0]?.replace(/\/namespaces\/[^/]+/, "/namespaces/*") ?? ""}`;
            writesByPath[key] = (writesByPath[key] ?? 0) + 1;
          }
        } catch {
          // Not a JSON line: ignore.
        }
      }
      callback();
    },
  });
  return {
    stream,
    counts() {
      const total = Object.values(byMethod).reduce((a, b) => a + b, 0);
      const writes = total - (byMethod["GET"] ?? 0) - (byMethod["HEAD"] ?? 0);
      return { total, writes, byMethod: { ...byMethod }, writesByPath: { ...writesByPath } };
    },
    reset() {
      byMethod = {};
      writesByPath = {};
    },
  };
}

export interface ChaosStackOptions {
  dir: string;
  instanceId?: string;
  /** Operator log level (debug by default: more output to scan for leaks). */
  logLevel?: string;
  pollFast?: string;
  pollSlow?: string;
  /** Service settings over test-service.ts's (e.g. a rate limit). */
  service?: NonNullable<Parameters<typeof testServiceOptions>[0]>["service"];
  /**
   * The operator's counterpart: our service (default), or the public-API emulator in front of it, which ignores
   * Idempotency-Key and loses `loseResponse` of the write responses after acting (seeded).
   */
  api?: "service" | "emulator";
  emulatorFaults?: EmulatorFaults;
}

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const dir = path.resolve(options.dir);
  const logDir = path.join(dir, "logs");
  await mkdir(logDir, { recursive: true });
  const instanceId = options.instanceId ?? "chaos";
  // The service logs at debug into a file that the secret scan reads too.
  const serviceLog = path.join(logDir, "service.log");
  const serviceLogger = pino({ level: "debug" }, pino.destination({ dest: serviceLog, sync: true }));
  const kubeRequests = createRequestCounter();
  let emulator: PublicApiEmulator | undefined;
  let apiProxy: FaultProxy | undefined;
  let kubeProxy: TcpProxy | undefined;
  const stack = await startStack({
    dir,
    instanceId,
    service: await testServiceOptions({
      logger: serviceLogger,
      ...(options.service === undefined ? {} : { service: options.service }),
    }),
    devkube: { logger: pino({ level: "debug" }, kubeRequests.stream) },
    // The harness's own calls (backups, invariants) go to the service directly: the truth, whatever the operator's
    // counterpart.
    api: async (serviceUrl) => {
      if (options.api === "emulator")
        emulator = await startPublicApiEmulator({
          upstream: serviceUrl,
          ...(options.emulatorFaults ? { faults: options.emulatorFaults } : {}),
        });
      const proxy = await startFaultProxy({ target: emulator?.url ?? serviceUrl });
      apiProxy = proxy;
      return {
        url: proxy.url,
        stop: async () => {
          await proxy.stop();
          await emulator?.stop();
        },
      };
    },
    kube: async (devkubeUrl) => {
      const url = new URL(devkubeUrl);
      const proxy = await startTcpProxy({ targetHost: url.hostname, targetPort: Number(url.port) });
      kubeProxy = proxy;
      return { url: proxy.url, stop: () => proxy.stop() };
    },
  });
  try {
    if (apiProxy === undefined || kubeProxy === undefined) throw new Error("the stack started without its seams");
    const { service, devkube } = stack;
    const kube = createKubeObjects(devkube.kubeconfigPath);
    const planted: PlantedSecret[] = [
      { name: "service API token", value: service.token },
      { name: "devkube token", value: devkube.token },
    ];
    for (const [name, url] of [
      ["control database password", service.controlUrl],
      ["PostgreSQL superuser password", service.postgres.url],
    ] as const) {
      const password = decodeURIComponent(new URL(url).password);
      if (password.length >= 8 && !planted.some((p) => p.value === password)) planted.push({ name, value: password });
    }

    const logFiles: string[] = [serviceLog];
    let started = 0;
    const startOperator = (o: StartOperatorOptions): OperatorProcess => {
      const logFile = path.join(logDir, `operator-${++started}-${o.identity}.log`);
      logFiles.push(logFile);
      return stack.startOperator({
        identity: o.identity,
        logFile,
        args: [
          "--poll-fast",
          options.pollFast ?? "300ms",
          "--poll-slow",
          options.pollSlow ?? "30s",
          "--metrics-address",
          "off",
          "--log-level",
          options.logLevel ?? "debug",
          o.leaderElect ? "--leader-elect" : "--no-leader-elect",
          ...(o.args ?? []),
        ],
        env: { ...(o.crashPoint === undefined ? {} : { MDS_CRASH_POINT: o.crashPoint }), ...o.env },
        ...(o.entry === undefined ? {} : { entry: o.entry }),
      });
    };

    return {
      dir,
      instanceId,
      api: { url: apiProxy.url, directUrl: service.url, token: service.token },
      controlUrl: service.controlUrl,
      apiProxy,
      emulator,
      kubeProxy,
      kubeRequests,
      devkube,
      kube,
      operatorKubeconfigPath: stack.operatorKubeconfigPath,
      planted,
      startOperator,
      async leaseHolder() {
        const lease = await kube.get("coordination.k8s.io/v1", "Lease", credentialsSecret.namespace, "mds-operator");
        return (lease?.spec?.["holderIdentity"] as string | undefined) ?? undefined;
      },
      logFiles: () => [...logFiles],
      stop: () => stack.stop(),
    };
  } catch (error) {
    await stack.stop();
    throw error;
  }
}
