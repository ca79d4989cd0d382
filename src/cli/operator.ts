import { limitHeapGrowth } from "./heap-flags.ts";
import { writeSync } from "node:fs";
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { createKubeClient, observeKubeRequests } from "../kube/client.ts";
import {
  inClusterKubeConfig,
  KubeConfigError,
  loadKubeConfig as loadKubeConfigFiles,
  type KubeConfig,
} from "../kube/kubeconfig.ts";
import pino, { type DestinationStream, type Logger } from "pino";
import { ConfigError, operatorHelp, parseOperatorConfig, type OperatorConfig } from "./operator-config.ts";
import { createLeaderElector, createLeaseClient, type LeaseClient } from "../operator/leader-election.ts";
import { createHealthApp, listenHealth } from "../operator/health-server.ts";
import { buildInfo } from "../operator/build-info.ts";
import { createMetricsRegistry, operatorMetrics } from "../operator/metrics.ts";
import { createOperator, type Operator, type OperatorOptions } from "../operator/index.ts";
import { controllers, crashPoints, objectGauges, secretKeys } from "../resources/index.ts";
import { mdsRemote } from "../resources/mds-remote.ts";
import type { KindSettingValues } from "../resources/mds-kind.ts";
import type { MdsRemote } from "../resources/remote/remote-api.ts";
import { mdsWireCodec } from "../resources/conversion/wire.ts";
import { defaultRateLimit } from "../client/index.ts";

// `mds operator`: configuration, logger, kubeconfig, leader election, health and metrics around the reconcilers
// that src/operator's createOperator builds.

/** The operator's options as the command builds them: every kind of the registry, each with its settings. */
export type RuntimeOperatorOptions = Omit<OperatorOptions<MdsRemote>, "controllers" | "remote"> & {
  kindSettings?: KindSettingValues;
};
export type CreateOperator = (options: RuntimeOperatorOptions) => Operator;

/** createOperator with the registry's controllers (src/resources/index.ts) and the service they call. */
export const createOperatorWithKinds: CreateOperator = ({ kindSettings, ...options }) =>
  createOperator({ ...options, remote: mdsRemote, codec: mdsWireCodec, controllers: controllers(kindSettings) });

// Secrets must never reach a log line: pino removes these paths wherever a caller puts them, and the keys of the
// kinds' Secrets whose values are secrets (the registry's `secretKeys()`) under any object.
export const redactPaths = (kinds?: Parameters<typeof secretKeys>[0]): string[] => [
  ...new Set([
    "token",
    "*.token",
    "password",
    "*.password",
    "connectionString",
    "*.connectionString",
    ...secretKeys(kinds).map((key) => `*.${key}`),
    "*.data",
    "*.stringData",
    "headers.authorization",
    "*.headers.authorization",
    "req.headers.authorization",
  ]),
];

export function createLogger(level: OperatorConfig["logLevel"], destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { name: "mds-operator", pid: process.pid },
    redact: { paths: redactPaths(), remove: true },
  };
  return destination ? pino(options, destination) : pino(options);
}

export function loadKubeConfig(
  config: Pick<OperatorConfig, "kubeconfig" | "context">,
  inCluster: boolean,
  env: Record<string, string | undefined> = {},
): KubeConfig {
  try {
    return loadKubeConfigFiles({ kubeconfig: config.kubeconfig, context: config.context, inCluster, env });
  } catch (err) {
    if (err instanceof KubeConfigError) throw new ConfigError(err.message);
    throw err;
  }
}

export interface OperatorRuntime {
  /** Where /metrics, /healthz and /readyz answer, when enabled. */
  healthUrl: string | undefined;
  /** Resolves when this replica lost its leadership: the process should exit and be restarted. */
  lost: Promise<void>;
  isLeader(): boolean;
  stop(): Promise<void>;
}

export interface RuntimeDeps {
  kubeConfig: KubeConfig;
  logger: Logger;
  createOperator: CreateOperator;
  identity: string;
  /** Tests may replace the Lease (default: a coordination/v1 Lease through kubeConfig). */
  leaseClient?: LeaseClient;
  leaseTiming?: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
}

export async function startOperatorRuntime(config: OperatorConfig, deps: RuntimeDeps): Promise<OperatorRuntime> {
  const { logger } = deps;
  const build = buildInfo();
  const registry = createMetricsRegistry(build);
  const metrics = operatorMetrics(registry, objectGauges());
  observeKubeRequests(deps.kubeConfig, (r) => metrics.restClientRequests.inc(r));
  let signalLost: () => void = () => undefined;
  const lost = new Promise<void>((resolve) => (signalLost = resolve));

  const leaseNamespace = config.leaseNamespace ?? config.credentialsSecret.namespace;
  const elector = config.leaderElect
    ? createLeaderElector({
        // The Lease gets one connection of its own, created once (never queued behind a burst of reconciles, never
        // a new TLS pool per renewal); its requests time out well within the renew deadline.
        lease:
          deps.leaseClient ??
          createLeaseClient(
            createKubeClient(deps.kubeConfig, {
              timeoutMs: 5_000,
              dispatcher: deps.kubeConfig.createDispatcher({ connections: 1 }),
            }),
            leaseNamespace,
            config.leaseName,
          ),
        identity: deps.identity,
        logger,
        ...(deps.leaseTiming ?? {}),
        onStartedLeading: () => {
          metrics.leader.set(1);
          metrics.leaderElectionMasterStatus.set({ name: config.leaseName }, 1);
        },
        onStoppedLeading: () => {
          metrics.leader.set(0);
          metrics.leaderElectionMasterStatus.set({ name: config.leaseName }, 0);
          signalLost();
        },
      })
    : undefined;
  if (!elector) metrics.leader.set(1);
  // A standby reports 0 from the start, as client-go does, so `max by (name)` sees every replica.
  else metrics.leaderElectionMasterStatus.set({ name: config.leaseName }, 0);
  const canWrite = elector ? () => elector.isLeader() : () => true;

  const operator = deps.createOperator({
    kubeConfig: deps.kubeConfig,
    apiUrl: config.apiUrl,
    defaultCredentials: {
      secretNamespace: config.credentialsSecret.namespace,
      secretName: config.credentialsSecret.name,
      key: config.credentialsKey,
      fallbackNamespaces: config.credentialsFallbackNamespaces?.includes("*")
        ? "*"
        : config.credentialsFallbackNamespaces,
    },
    namespaces: config.namespaces && config.namespaces.length > 0 ? config.namespaces : undefined,
    instanceId: config.instanceId,
    concurrency: config.concurrency,
    pollIntervals: { fastMs: config.pollFast, slowMs: config.pollSlow },
    logger,
    metrics: registry,
    canWrite,
    ...(config.apiRate === undefined && config.apiBurst === undefined
      ? {}
      : {
          apiRateLimit: {
            requestsPerSecond: config.apiRate ?? defaultRateLimit.requestsPerSecond,
            burst: config.apiBurst ?? defaultRateLimit.burst,
          },
        }),
    ...(Object.keys(config.kindSettings).length === 0 ? {} : { kindSettings: config.kindSettings }),
    ...(config.rotationConsumers ? { followConsumers: true } : {}),
  });

  let stopped = false;
  let failed = false;
  let healthUrl: string | undefined;
  const app =
    config.metricsAddress === "off"
      ? undefined
      : createHealthApp({
          registry,
          isLive: () => !failed,
          isReady: () => !stopped && operator.isReady(),
          describe: () =>
            elector === undefined
              ? "leader election disabled"
              : elector.isLeader()
                ? "leader"
                : `standby (leader: ${elector.observedLeader() ?? "none yet"})`,
        });
  if (app) healthUrl = (await listenHealth(app, config.metricsAddress)).url;

  logger.info(
    {
      apiUrl: config.apiUrl,
      namespaces: config.namespaces ?? "all",
      instanceId: config.instanceId,
      leaderElection: config.leaderElect,
      identity: deps.identity,
      healthUrl,
      version: build.version,
      commit: build.commit,
    },
    `Starting operator ${build.version}`,
  );
  try {
    await operator.start();
  } catch (err) {
    failed = true;
    await app?.close();
    throw new Error(`cannot start the operator: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  elector?.start();

  return {
    healthUrl,
    lost,
    isLeader: canWrite,
    async stop() {
      if (stopped) return;
      stopped = true;
      // Stop writing first, then release the Lease so a standby takes over at once.
      await operator.stop();
      await elector?.stop();
      await app?.close();
      logger.info("Stopped operator");
    },
  };
}

/**
 * Test-only: MDS_CRASH_POINT=<name>[:<count>][,<name>[:<count>]...] kills this process (SIGKILL, no cleanup) the
 * count-th time the operator reaches one of the named points, so chaos tests can crash it exactly between two steps
 * of an algorithm. The names are the registered controllers' (src/resources/index.ts). An unknown name is an error: a misspelt point would otherwise never fire and prove nothing.
 */
export function crashPointFromEnv(
  value: string | undefined,
  kill: () => void,
  known: readonly string[] = crashPoints(),
): ((name: string) => void) | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const armed = new Map<string, { count: number; seen: number }>();
  for (const item of value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")) {
    const m = /^(.+?)(?::(\d+))?$/.exec(item);
    const name = m?.[1] ?? item;
    if (!known.includes(name))
      throw new Error(`MDS_CRASH_POINT: unknown crash point "${name}" (known: ${known.join(", ")})`);
    armed.set(name, { count: Math.max(1, Number(m?.[2] ?? "1")), seen: 0 });
  }
  return (name) => {
    const point = armed.get(name);
    if (point === undefined) return;
    point.seen += 1;
    if (point.seen === point.count) {
      writeSync(2, `mds operator: crash point ${name} reached (${point.count}): killing this process\n`);
      kill();
    }
  };
}

/**
 * Benchmark-only: MDS_QUEUE_ORDER=fifo serves the work queues in arrival order, as before namespaces were served in
 * turn, so bench/fairness.ts can compare both orders in one run. Unset or "namespaces": the default. Anything else is
 * an error, so a typo does not silently measure the default.
 */
export function queueOrderFromEnv(value: string | undefined): "namespaces" | "fifo" {
  if (value === undefined || value === "" || value === "namespaces") return "namespaces";
  if (value === "fifo") return "fifo";
  throw new Error(`MDS_QUEUE_ORDER: "${value}" is neither "namespaces" nor "fifo"`);
}

// The image runs this module bundled with everything it imports (scripts/bundle-operator.ts): what
// bench/operator-rss-child.mjs needs besides is exported from here, so it loads no second copy of them.
export { inClusterKubeConfig, limitHeapGrowth, parseOperatorConfig };

export async function runOperator(argv: string[]): Promise<number> {
  // Normally done by src/cli/main.ts before this module loaded; idempotent.
  limitHeapGrowth();
  let config: OperatorConfig;
  try {
    const parsed = parseOperatorConfig(argv, process.env);
    if (parsed === "help") {
      console.log(operatorHelp());
      return 0;
    }
    config = parsed;
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`mds operator: ${err.message}\n\n${operatorHelp()}`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  let kubeConfig: KubeConfig;
  try {
    kubeConfig = loadKubeConfig(
      config,
      process.env.KUBERNETES_SERVICE_HOST !== undefined && config.kubeconfig === undefined,
      process.env,
    );
  } catch (err) {
    logger.error({ err: err instanceof Error ? err.message : String(err) }, "Cannot load the Kubernetes configuration");
    return 2;
  }
  let crashPoint: ReturnType<typeof crashPointFromEnv>;
  try {
    crashPoint = crashPointFromEnv(process.env.MDS_CRASH_POINT, () => process.kill(process.pid, "SIGKILL"));
  } catch (err) {
    logger.error({ err: err instanceof Error ? err.message : String(err) }, "Invalid MDS_CRASH_POINT");
    return 2;
  }
  let queueOrder: "namespaces" | "fifo";
  try {
    queueOrder = queueOrderFromEnv(process.env.MDS_QUEUE_ORDER);
  } catch (err) {
    logger.error({ err: err instanceof Error ? err.message : String(err) }, "Invalid MDS_QUEUE_ORDER");
    return 2;
  }
  if (queueOrder === "fifo")
    logger.warn("MDS_QUEUE_ORDER=fifo: work queues in arrival order, not namespaces in turn (for benchmarks only)");
  const identity = config.identity ?? `${hostname()}_${randomUUID().slice(0, 8)}`;
  const runtime = await startOperatorRuntime(config, {
    kubeConfig,
    logger,
    createOperator: (options) =>
      createOperatorWithKinds({ ...options, queueOrder, ...(crashPoint ? { crashPoint } : {}) }),
    identity,
  });

  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM"];
  const reason = await new Promise<"signal" | "lost">((resolve) => {
    for (const s of signals) process.once(s, () => resolve("signal"));
    void runtime.lost.then(() => resolve("lost"));
  });
  if (reason === "lost") logger.error("Leadership lost: exiting so a fresh process campaigns again");
  await runtime.stop();
  return reason === "lost" ? 1 : 0;
}
