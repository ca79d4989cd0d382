import { spawn } from "node:child_process";
import { openSync, closeSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { startDevkube, type Devkube } from "../../../src/devkube/index.ts";
import { startTestService } from "../test-service.ts";
import { startFaultProxy, type FaultProxy } from "../fault-proxy.ts";
import { startPublicApiEmulator, type EmulatorFaults, type PublicApiEmulator } from "../public-api-emulator/server.ts";
import { createKubeObjects, type KubeObject, type KubeObjects } from "../kube-objects.ts";
import type { PlantedSecret } from "../secret-scan.ts";
import { startTcpProxy, type TcpProxy } from "../tcp-proxy.ts";

// The whole local stack for chaos runs and operator benchmarks: PostgreSQL and the service (through
// src/service/testing.ts), the fault proxy in front of the service, devkube with the CRDs from crds/,
// a TCP proxy in front of devkube (to cut watches), the default credentials Secret, and operator
// processes started the way `mds operator` runs in a cluster, each logging to its own file.

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

export interface OperatorProcess {
  identity: string;
  pid: number;
  logFile: string;
  /** True once the harness itself sent a signal (so a SIGKILL exit is not a crash point). */
  killedByHarness: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  kill(signal: NodeJS.Signals): Promise<void>;
}

export interface StartOperatorOptions {
  identity: string;
  leaderElect: boolean;
  /** MDS_CRASH_POINT: `<name>[:<count>]`, comma-separated. */
  crashPoint?: string;
  /** Extra flags, e.g. ["--poll-slow", "30s"]. */
  args?: string[];
  env?: Record<string, string>;
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

export const credentialsSecret = { namespace: "mds-system", name: "mds-credentials", key: "token" };

export interface ChaosStackOptions {
  dir: string;
  instanceId?: string;
  /** Operator log level (debug by default: more output to scan for leaks). */
  logLevel?: string;
  pollFast?: string;
  pollSlow?: string;
  /** Options passed to startTestService (e.g. a rate limit). */
  service?: NonNullable<Parameters<typeof startTestService>[0]>["service"];
  /**
   * The operator's counterpart: our service (default), or the public-API emulator in front of it, which ignores
   * Idempotency-Key and loses `loseResponse` of the write responses after acting (seeded).
   */
  api?: "service" | "emulator";
  emulatorFaults?: EmulatorFaults;
}

async function applyCrds(kube: KubeObjects): Promise<void> {
  const dir = path.join(repoRoot, "crds");
  for (const file of (await readdir(dir)).filter((f) => f.endsWith(".yaml")).sort()) {
    await kube.apply(parseYaml(await readFile(path.join(dir, file), "utf8")) as KubeObject);
  }
  // Wait until devkube serves the kinds.
  for (let i = 0; i < 200; i++) {
    try {
      await kube.list("mds.dev/v1alpha1", "Database", "default");
      await kube.list("mds.dev/v1alpha1", "Project", "default");
      await kube.list("mds.dev/v1alpha1", "DatabaseRestore", "default");
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error("cannot start the chaos stack: the CRDs from crds/ were not served by devkube within 20 s");
}

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const dir = path.resolve(options.dir);
  const logDir = path.join(dir, "logs");
  await mkdir(logDir, { recursive: true });
  const instanceId = options.instanceId ?? "chaos";
  const cleanups: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    // The service logs at debug into a file that the secret scan reads too.
    const serviceLog = path.join(logDir, "service.log");
    const serviceLogger = pino({ level: "debug" }, pino.destination({ dest: serviceLog, sync: true }));
    const service = await startTestService({ logger: serviceLogger, ...(options.service === undefined ? {} : { service: options.service }) });
    cleanups.push(() => service.stop());
    const controlUrl: string | undefined = service.controlUrl;
    const emulator = options.api === "emulator" ? await startPublicApiEmulator({ upstream: service.url, ...(options.emulatorFaults ? { faults: options.emulatorFaults } : {}) }) : undefined;
    if (emulator) cleanups.push(() => emulator.stop());
    // The harness's own calls (backups, invariants) go to directUrl: the truth, whatever the operator's counterpart.
    const apiProxy = await startFaultProxy({ target: emulator?.url ?? service.url });
    cleanups.push(() => apiProxy.stop());

    const kubeRequests = createRequestCounter();
    const devkube = await startDevkube({ dir: path.join(dir, "devkube"), logger: pino({ level: "debug" }, kubeRequests.stream) });
    cleanups.push(() => devkube.stop());
    const devkubeUrl = new URL(devkube.url);
    const kubeProxy = await startTcpProxy({ targetHost: devkubeUrl.hostname, targetPort: Number(devkubeUrl.port) });
    cleanups.push(() => kubeProxy.stop());
    const kubeconfig = parseYaml(devkube.kubeconfig) as { clusters: Array<{ cluster: { server: string } }> };
    for (const c of kubeconfig.clusters) c.cluster.server = kubeProxy.url;
    const operatorKubeconfigPath = path.join(dir, "operator.kubeconfig");
    await writeFile(operatorKubeconfigPath, toYaml(kubeconfig), { mode: 0o600 });

    const kube = createKubeObjects(devkube.kubeconfigPath);
    await applyCrds(kube);
    await kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: credentialsSecret.namespace } });
    await kube.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: credentialsSecret.name, namespace: credentialsSecret.namespace },
      data: { [credentialsSecret.key]: Buffer.from(service.token).toString("base64") },
    });

    const planted: PlantedSecret[] = [
      { name: "service API token", value: service.token },
      { name: "devkube token", value: devkube.token },
    ];
    for (const [name, url] of [["control database password", controlUrl], ["PostgreSQL superuser password", service.postgresUrl]] as const) {
      const password = decodeURIComponent(new URL(url).password);
      if (password.length >= 8 && !planted.some((p) => p.value === password)) planted.push({ name, value: password });
    }

    const logFiles: string[] = [serviceLog];
    const processes = new Set<OperatorProcess>();
    cleanups.push(async () => {
      for (const p of processes) if (p.alive()) await p.kill("SIGKILL");
    });
    let started = 0;

    const startOperator = (o: StartOperatorOptions): OperatorProcess => {
      const logFile = path.join(logDir, `operator-${++started}-${o.identity}.log`);
      logFiles.push(logFile);
      const fd = openSync(logFile, "a");
      const args = [
        path.join(repoRoot, "bin/mds.js"),
        "operator",
        "--kubeconfig",
        operatorKubeconfigPath,
        "--api-url",
        apiProxy.url,
        "--credentials-secret",
        `${credentialsSecret.namespace}/${credentialsSecret.name}`,
        "--instance-id",
        instanceId,
        "--poll-fast",
        options.pollFast ?? "300ms",
        "--poll-slow",
        options.pollSlow ?? "30s",
        "--metrics-address",
        "off",
        "--log-level",
        options.logLevel ?? "debug",
        "--identity",
        o.identity,
        o.leaderElect ? "--leader-elect" : "--no-leader-elect",
        ...(o.args ?? []),
      ];
      const child = spawn(process.execPath, args, {
        stdio: ["ignore", fd, fd],
        env: { ...process.env, ...(o.crashPoint === undefined ? {} : { MDS_CRASH_POINT: o.crashPoint }), ...(o.env ?? {}) },
      });
      closeSync(fd);
      let alive = true;
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
        child.once("exit", (code, signal) => {
          alive = false;
          processes.delete(proc);
          resolve({ code, signal });
        });
      });
      const proc: OperatorProcess = {
        identity: o.identity,
        pid: child.pid ?? -1,
        logFile,
        killedByHarness: false,
        exited,
        alive: () => alive,
        async kill(signal) {
          if (!alive) return;
          proc.killedByHarness = true;
          child.kill(signal);
          await exited;
        },
      };
      processes.add(proc);
      return proc;
    };

    return {
      dir,
      instanceId,
      api: { url: apiProxy.url, directUrl: service.url, token: service.token },
      controlUrl,
      apiProxy,
      emulator,
      kubeProxy,
      kubeRequests,
      devkube,
      kube,
      operatorKubeconfigPath,
      planted,
      startOperator,
      async leaseHolder() {
        const lease = await kube.get("coordination.k8s.io/v1", "Lease", credentialsSecret.namespace, "mds-operator");
        return (lease?.spec?.["holderIdentity"] as string | undefined) ?? undefined;
      },
      logFiles: () => [...logFiles],
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
