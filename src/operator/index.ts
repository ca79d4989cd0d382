import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { prometheusHooks, type ClientHooks } from "../client/index.ts";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import type { WireCodec } from "../kube/wire-codec.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { annotations, managedSecretSelector } from "./secret/render.ts";
import {
  createCredentialPool,
  type OperatorCredentials,
  type RemoteDefinition,
  type RemoteState,
} from "./credentials.ts";
import { createCredentialsGuard, credentialsSecretOf, type CredentialsGuard } from "./credentials-guard.ts";
import { createDeletionProtectionAudit } from "./deletion-protection-audit.ts";
import { createEventRecorder } from "./events.ts";
import { createAcceptedIds } from "./accepted.ts";
import type { ControllerContext, Controller, ObjectCache } from "./controller.ts";
import { operatorMetrics, reportApiContexts } from "./metrics.ts";
import { splitKey } from "./status.ts";
import { createConsumerIndex, type ConsumerIndex } from "./secret/consumer-index.ts";
import { PodType, workloadTypes } from "./secret/consumers.ts";
import { createCaches, createRemoteIdIndex, keyOf, type Caches } from "./caches.ts";
import { createDerivedState } from "./derived-state.ts";
import { countWrites, gateApiWrites } from "./leader-gate.ts";
import { createQueues, startWorkers } from "./workers.ts";

// The operator, wired: caches (caches.ts) feed the kinds' queues, what is derived from them (derived-state.ts) and
// the credentials guard; workers (workers.ts) reconcile the keys while this replica leads (leader-gate.ts).

export interface OperatorOptions<R extends RemoteState = RemoteState> {
  kubeConfig: KubeConfig;
  apiUrl: string;
  /** One controller per kind to reconcile (src/resources/index.ts: controllers()). */
  controllers: Controller<R>[];
  /** The service the controllers call: its client and mirror per credential (src/resources/remote/remote-api.ts). */
  remote: RemoteDefinition<R>;
  /** The operator's own API token Secret, and which namespaces may fall back to it (default: its own). */
  defaultCredentials: OperatorCredentials;
  /** undefined = all namespaces */
  namespaces: string[] | undefined;
  /** For logicalId "k8s:<instanceId>:<namespace>/<name>". */
  instanceId: string;
  /** Workers per kind. */
  concurrency: number;
  /** ~1 s while provisioning/recovering, 5 min settled. */
  pollIntervals: { fastMs: number; slowMs: number };
  logger: Logger;
  metrics: Registry;
  /** Leader election: false → no Kubernetes or API writes. */
  canWrite: () => boolean;
  /** Test-only: called at named points of the create and restore algorithms; a throw simulates a crash there. */
  crashPoint?: (name: string) => void | Promise<void>;
  /** Rate budget shared by every caller of one credential (default: the client's, 10 requests/s, burst 20). */
  apiRateLimit?: { requestsPerSecond: number; burst: number };
  /** Test seam: the API client of one credential (default: the remote definition's, with Prometheus hooks). */
  createApiClient?: ((options: { baseUrl: string; token: string }) => R["api"]) | undefined;
  /** Test seam: the Kubernetes client (default: built from kubeConfig). */
  kube?: KubeClient;
  /** The version the kinds are spoken in on the wire, and the conversion to it (default: their own). */
  codec?: WireCodec;
  /**
   * Benchmark-only: "fifo" serves every kind's queue in arrival order instead of namespaces in turn (work-queue.ts),
   * so bench/fairness.ts can measure what fairness buys in one run (MDS_QUEUE_ORDER).
   */
  queueOrder?: "namespaces" | "fifo";
  /**
   * Follow the consumers of the connection Secrets (--rotation-consumers): watch Deployments, StatefulSets,
   * DaemonSets and Pods so a rotation with consumers Restart or Wait can roll them and wait for them. Off by default:
   * it needs the RBAC of the rotation-consumers component.
   */
  followConsumers?: boolean;
}

export interface Operator {
  start(): Promise<void>;
  stop(): Promise<void>;
  isReady(): boolean;
}

export function createOperator<R extends RemoteState>(options: OperatorOptions<R>): Operator {
  const logger = options.logger;
  const metrics = operatorMetrics(
    options.metrics,
    options.controllers.flatMap((c) => c.objectGauges?.gauges ?? []),
  );
  const kube = countWrites(
    options.kube ?? createKubeClient(options.kubeConfig, { codec: options.codec }),
    metrics.kubeWrites,
    options.canWrite,
  );
  const namespaces = options.namespaces ?? [undefined];
  const kinds = new Set(options.controllers.map((k) => k.kind));
  const queues = createQueues(options.controllers, metrics, options.queueOrder ?? "namespaces");
  const enqueue = (kind: string, key: string) => queues.get(kind)?.add(key);
  const watched = createCaches({ kubeConfig: options.kubeConfig, kube, codec: options.codec, namespaces, logger });
  const derived = createDerivedState(options.controllers, metrics);
  const { caches, accepted, remoteIds } = watchKinds(
    options.controllers,
    watched,
    enqueue,
    (kind, key, obj, deleted) => {
      derived.update(kind, key, obj, deleted);
      if (deleted) credentials.release(obj);
    },
  );
  const secrets = watchOwnSecrets(watched, kinds, enqueue);
  const consumers = options.followConsumers === true ? followConsumers(watched, secrets, kinds, enqueue) : undefined;
  const credentials = guardCredentials(options, kube, caches, namespaces, () => audit.run());
  const pool = credentialPool(options, kube, credentials.guard, metrics, (id) => {
    for (const { kind, key } of remoteIds.keys(id)) enqueue(kind, key);
  });
  const context: ControllerContext<R> = {
    ...{ kube, pool, accepted, secrets, logger, consumers },
    defaultCredentials: options.defaultCredentials,
    instanceId: options.instanceId,
    cache: (kind) => caches.get(kind) ?? unregistered(kind),
    events: createEventRecorder(kube, logger, { instance: options.instanceId }),
    pollIntervals: options.pollIntervals,
    crashPoint: options.crashPoint ?? (() => {}),
  };
  const audit = auditDeletionProtection(options, kube, context.events, () =>
    derived.deletionProtected((kind) => caches.get(kind)),
  );
  const stateSource = derived.stateSource({ queues, cache: context.cache, protectionMissing: audit.missing });
  let removeStateSource: (() => void) | undefined;

  let ready = false;
  let started = false;
  return {
    async start() {
      if (started) return;
      started = true;
      await watched.start();
      startWorkers({
        controllers: options.controllers,
        queues,
        context,
        concurrency: options.concurrency,
        metrics,
        canWrite: options.canWrite,
        asLeader: audit.firstAsLeader,
      });
      removeStateSource = metrics.state.add(stateSource);
      ready = true;
      credentials.start();
      logger.info({ namespaces: options.namespaces ?? "all" }, "Operator started");
    },
    async stop() {
      ready = false;
      removeStateSource?.();
      credentials.stop();
      pool.stop();
      await Promise.all([...queues.values()].map((q) => q.stop()));
      await watched.stop();
      logger.info("Operator stopped");
    },
    isReady: () => ready && watched.hasSynced(),
  };
}

/**
 * One informer per kind: an event enqueues its own key, updates what is kept from it (`onChange`) and wakes what
 * depends on it (the wakeOn of every kind, its own included); an accepted id wakes the same. Each kind's cache finds
 * its objects by remote id (`withRemoteId`).
 */
function watchKinds(
  controllers: readonly Controller[],
  watched: Caches,
  enqueue: (kind: string, key: string) => void,
  onChange: (kind: string, key: string, obj: KubeObject, deleted: boolean) => void,
) {
  const caches = new Map<string, ObjectCache>();
  const remoteIds = createRemoteIdIndex();
  const dependants = new Map(
    controllers.map((reg) => [
      reg.kind,
      controllers.flatMap((other) =>
        (other.wakeOn ?? []).filter((w) => w.kind === reg.kind).map((w) => ({ kind: other.kind, keys: w.keys })),
      ),
    ]),
  );
  const wakeDependants = (kind: string, obj: KubeObject) => {
    for (const d of dependants.get(kind) ?? [])
      for (const key of d.keys(obj, caches.get(d.kind)!)) enqueue(d.kind, key);
  };
  // An id a loop accepted (or no longer does) wakes what refers to that resource, as a change of it would: an
  // acceptance after a restart changes no status, so no watch event would.
  const accepted = createAcceptedIds((kind, ns, name) => {
    const obj = caches.get(kind)?.get(ns, name);
    if (obj !== undefined) wakeDependants(kind, obj);
  });
  for (const reg of controllers) {
    const cache = watched.watch(reg.type, (event, obj) => {
      const deleted = event === "delete";
      if (deleted) accepted.forget(reg.kind, obj, { gone: true });
      remoteIds.update(reg.kind, obj, deleted);
      onChange(reg.kind, keyOf(obj), obj, deleted);
      enqueue(reg.kind, keyOf(obj));
      wakeDependants(reg.kind, obj);
    });
    caches.set(reg.kind, { ...cache, withRemoteId: (id) => remoteIds.objects(reg.kind, id, cache) });
  }
  return { caches, accepted, remoteIds };
}

/**
 * Whether the API server enforces deletion protection, checked at the first reconcile as leader (a standby that takes
 * over checks at once, not at the next sweep) and at every sweep; not where chosen namespaces are watched (the
 * single-namespace install grants no cluster-scoped read).
 */
function auditDeletionProtection<R extends RemoteState>(
  options: OperatorOptions<R>,
  kube: KubeClient,
  events: ControllerContext<R>["events"],
  objects: () => KubeObject[],
) {
  const audit = createDeletionProtectionAudit({ kube, events, logger: options.logger, objects });
  let audited = false;
  const run = () => {
    audited = true;
    if (options.namespaces === undefined) void audit.run();
  };
  return {
    run,
    firstAsLeader: () => {
      if (!audited) run();
    },
    missing: () => audit.state() === "missing",
  };
}

function unregistered(kind: string): never {
  throw new Error(`kind ${kind} is not registered`);
}

/** One client, rate budget and mirror per credential (credentials.ts); a remote change wakes who names its id. */
function credentialPool<R extends RemoteState>(
  options: OperatorOptions<R>,
  kube: KubeClient,
  guard: Pick<CredentialsGuard, "protect">,
  metrics: ReturnType<typeof operatorMetrics>,
  onRemoteChange: (id: string) => void,
) {
  return createCredentialPool({
    kube,
    protect: (secret) => guard.protect(secret),
    apiUrl: options.apiUrl,
    createApiClient: apiClientFactory(options, new Set(options.remote.writes)),
    createMirror: options.remote.mirror,
    logger: options.logger,
    pollIntervals: options.pollIntervals,
    onContexts: reportApiContexts(metrics),
    onRemoteChange: (_kind, id) => onRemoteChange(id),
  });
}

/** The API client of one credential: the remote definition's (or the test seam's), its writes gated by the lease. */
function apiClientFactory<R extends RemoteState>(options: OperatorOptions<R>, writes: ReadonlySet<string>) {
  // API calls, attempts, retries and throttled time by operation: the client's mds_client_* metrics.
  const apiHooks: ClientHooks = prometheusHooks(options.metrics);
  const build =
    options.createApiClient ??
    (({ baseUrl, token }: { baseUrl: string; token: string }) =>
      options.remote.client({
        baseUrl,
        token,
        hooks: apiHooks,
        logger: options.logger.child({ component: "mds-client" }),
        ...(options.apiRateLimit === undefined ? {} : { rateLimit: options.apiRateLimit }),
      }));
  return (o: { baseUrl: string; token: string }) => gateApiWrites(build(o), writes, options.canWrite);
}

/** Only the operator's own Secrets are cached (label selector): unrelated Secrets cost no memory. */
function watchOwnSecrets(watched: Caches, kinds: ReadonlySet<string>, enqueue: (kind: string, key: string) => void) {
  return watched.watch(
    SecretType,
    (_event, obj) => {
      // A deleted or edited Secret wakes the resource that publishes it (annotation, as Retain Secrets have no owner).
      const [kind, name] = (obj.metadata.annotations?.[annotations.owner] ?? "").split("/");
      if (kind !== undefined && name !== undefined && name !== "") enqueue(kind, `${obj.metadata.namespace}/${name}`);
      for (const ref of obj.metadata.ownerReferences ?? [])
        if (kinds.has(ref.kind)) enqueue(ref.kind, `${obj.metadata.namespace}/${ref.name}`);
    },
    managedSecretSelector,
  ) as ObjectCache & {
    get(ns: string | undefined, name: string): Secret | undefined;
    list(namespace?: string): Secret[];
  };
}

/**
 * The consumer index, fed by one informer per workload kind and Pods. A change of a Secret's consumer wakes the
 * resource that publishes the Secret (its mds.dev/owner annotation, in the same namespace), so a rotation waiting
 * for a rollout moves on when it ends, not on a timer. Secrets the operator does not publish wake nothing.
 */
function followConsumers(
  watched: Caches,
  secrets: { get(ns: string | undefined, name: string): Secret | undefined },
  kinds: ReadonlySet<string>,
  enqueue: (kind: string, key: string) => void,
): ConsumerIndex {
  const index = createConsumerIndex();
  for (const type of [...workloadTypes, PodType])
    watched.watch(type, (event, obj) => {
      for (const key of index.update(type.kind, obj, event === "delete")) {
        const [ns, name] = splitKey(key);
        const owner = secrets.get(ns, name)?.metadata.annotations?.[annotations.owner] ?? "";
        const i = owner.indexOf("/");
        if (i > 0 && kinds.has(owner.slice(0, i))) enqueue(owner.slice(0, i), `${ns ?? ""}/${owner.slice(i + 1)}`);
      }
    });
  return index;
}

/**
 * The credentials Secrets the resources act with stay until the last resource that needs one is gone: released when
 * such a resource is deleted, swept at start and then every `sweepIntervalMs` while leader (with the deletion
 * protection audit, `audit`).
 */
function guardCredentials<R extends RemoteState>(
  options: OperatorOptions<R>,
  kube: KubeClient,
  caches: ReadonlyMap<string, ObjectCache>,
  namespaces: (string | undefined)[],
  audit: () => void,
) {
  const loopFinalizers = new Set(options.controllers.map((k) => `${k.type.group}/finalizer`));
  const guard = createCredentialsGuard({
    kube,
    dependents: (namespace) =>
      [...caches.values()]
        .flatMap((c) => c.list(namespace))
        .filter((o) => (o.metadata.finalizers ?? []).some((f) => loopFinalizers.has(f))),
    namespaces,
    logger: options.logger,
  });
  const sweep = () => {
    if (!options.canWrite()) return;
    guard.sweep().catch((err: unknown) => options.logger.warn({ err }, "Could not sweep credentials Secrets"));
    audit();
  };
  let timer: NodeJS.Timeout | undefined;
  return {
    guard,
    release(obj: KubeObject) {
      const secret = credentialsSecretOf(obj);
      const i = secret?.indexOf("/") ?? -1;
      if (secret === undefined || i < 0 || !options.canWrite()) return;
      guard
        .release(secret.slice(0, i), secret.slice(i + 1))
        .catch((err: unknown) => options.logger.warn({ err, secret }, "Could not release credentials Secret"));
    },
    start() {
      // A resource that moved to other credentials, or went while no operator ran, left a guarded Secret behind.
      sweep();
      timer = setInterval(sweep, sweepIntervalMs(options.pollIntervals.slowMs));
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * How often the credentials guard is swept after the sweep at start: the settled interval, but at most a minute, so a
 * standby that becomes leader (its sweeps were skipped) releases soon after (one list of the labelled Secrets).
 */
export function sweepIntervalMs(slowMs: number): number {
  return Math.min(slowMs, 60_000);
}
