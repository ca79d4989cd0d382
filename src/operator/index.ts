import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { prometheusHooks, type ClientHooks } from "../client/index.ts";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { createInformer, type Informer } from "../kube/informer.ts";
import type { WireCodec } from "../kube/wire-codec.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";
import { SecretType, type KubeObject, type ResourceType, type Secret } from "../kube/types.ts";
import { annotations, managedSecretSelector } from "./secret/render.ts";
import {
  createCredentialPool,
  type OperatorCredentials,
  type RemoteDefinition,
  type RemoteState,
} from "./credentials.ts";
import { createCredentialsGuard, credentialsSecretOf } from "./credentials-guard.ts";
import { createDeletionProtectionAudit } from "./deletion-protection-audit.ts";
import { createEventRecorder } from "./events.ts";
import { remoteIdOf } from "./identity.ts";
import { createAcceptedIds } from "./accepted.ts";
import type { ControllerContext, Controller, ObjectCache } from "./controller.ts";
import { operatorMetrics, reportApiContexts, type OperatorMetrics, type StateSource } from "./metrics.ts";
import { resourceStateOf, summarizeStates, type ResourceState } from "./resource-state.ts";
import { applyOutcome, notLeaderRequeueMs, type Outcome } from "./outcome.ts";
import { createWorkQueue, type QueueObserver, type WorkQueue } from "./work-queue.ts";
import { ReconcileError, classifyError } from "./errors.ts";
import { splitKey } from "./status.ts";
import { createConsumerIndex, type ConsumerIndex } from "./secret/consumer-index.ts";
import { PodType, workloadTypes } from "./secret/consumers.ts";

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

// eslint-disable-next-line max-lines-per-function -- wiring: informers, queues, caches, pool and workers share one closure; each helper is short
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
  const crashPoint = options.crashPoint ?? (() => {});
  const writes = new Set(options.remote.writes);
  const createApiClient = (o: { baseUrl: string; token: string }) =>
    gateApiWrites(buildApiClient(o), writes, options.canWrite);
  const buildApiClient =
    options.createApiClient ??
    (({ baseUrl, token }: { baseUrl: string; token: string }) =>
      options.remote.client({
        baseUrl,
        token,
        hooks: apiHooks,
        logger: logger.child({ component: "mds-client" }),
        ...(options.apiRateLimit === undefined ? {} : { rateLimit: options.apiRateLimit }),
      }));

  // API calls, attempts, retries and throttled time by operation: the client's mds_client_* metrics.
  const apiHooks: ClientHooks = prometheusHooks(options.metrics);

  const kinds = new Map(options.controllers.map((k) => [k.kind, k]));
  const queues = new Map<string, WorkQueue>(
    options.controllers.map((k) => [
      k.kind,
      createWorkQueue(undefined, queueObserver(metrics, controllerName(k.kind)), {
        order: options.queueOrder ?? "namespaces",
      }),
    ]),
  );
  const enqueue = (kind: string, key: string) => queues.get(kind)?.add(key);
  const informers: Informer<KubeObject>[] = [];
  const caches = new Map<string, ObjectCache>();
  const byRemoteId = new Map<string, Set<string>>(); // remote id → "Kind|ns/name"
  const readyAt = new Map<string, number>();

  function indexRemote(kind: string, obj: KubeObject, deleted: boolean) {
    const id = remoteIdOf(obj);
    if (id === undefined) return;
    const entry = `${kind}|${keyOf(obj)}`;
    let set = byRemoteId.get(id);
    if (deleted) {
      set?.delete(entry);
      // No empty sets left behind: churn (create, delete, repeat) must not grow the index.
      if (set?.size === 0) byRemoteId.delete(id);
      return;
    }
    if (set === undefined) byRemoteId.set(id, (set = new Set()));
    set.add(entry);
  }

  /** The cached objects of `kind` the index lists under remote id `id` (an entry may be stale: callers re-check). */
  function indexed(kind: string, id: string, cache: ObjectCache): KubeObject[] {
    const found: KubeObject[] = [];
    for (const entry of byRemoteId.get(id) ?? []) {
      if (!entry.startsWith(`${kind}|`)) continue;
      const [ns, name] = splitKey(entry.slice(kind.length + 1));
      const obj = cache.get(ns, name);
      if (obj !== undefined) found.push(obj);
    }
    return found;
  }

  function makeInformers(
    type: ResourceType,
    onEvent: (event: "add" | "update" | "delete", obj: KubeObject) => void,
    labelSelector?: string,
  ): ObjectCache {
    const parts = namespaces.map((namespace) =>
      createInformer<KubeObject>({
        kubeConfig: options.kubeConfig,
        client: kube,
        codec: options.codec,
        type,
        namespace,
        labelSelector,
        onEvent,
        logger,
      }),
    );
    informers.push(...parts);
    return {
      get(ns, name) {
        for (const p of parts) {
          const o = p.get(ns, name);
          if (o !== undefined) return o;
        }
        return undefined;
      },
      list: (ns) => parts.flatMap((p) => p.list(ns)),
    };
  }

  // What a scrape reads, kept from the events (resource-state.ts): each kind's objects' states, and the views of the
  // kinds' per-object gauges. A scrape unpacks no cached object; neither does the deletion-protection audit.
  const states = new Map(options.controllers.map((k) => [k.kind, new Map<string, ResourceState>()]));
  const gaugeViews = options.controllers.flatMap((c) =>
    c.objectGauges === undefined ? [] : [{ gauges: c.objectGauges, views: new Map<string, unknown>() }],
  );
  // The objects with spec.deletionProtection ("Kind|namespace/name"), for the audit: few, and found without a scan.
  const deletionProtected = new Set<string>();
  function keepDerivedState(kind: string, key: string, obj: KubeObject, deleted: boolean) {
    if (deleted) states.get(kind)?.delete(key);
    else states.get(kind)?.set(key, resourceStateOf(obj));
    const protectedNow = !deleted && (obj["spec"] as { deletionProtection?: unknown } | undefined)?.deletionProtection;
    if (protectedNow === true) deletionProtected.add(`${kind}|${key}`);
    else deletionProtected.delete(`${kind}|${key}`);
    for (const { gauges, views } of gaugeViews) {
      if (gauges.of !== kind) continue;
      const view = deleted ? undefined : gauges.view(obj);
      if (view === undefined) views.delete(key);
      else views.set(key, view);
    }
  }

  const dependantsOf = (kind: string) =>
    options.controllers.flatMap((other) =>
      (other.wakeOn ?? []).filter((w) => w.kind === kind).map((w) => ({ kind: other.kind, keys: w.keys })),
    );
  const wakeDependants = (kind: string, obj: KubeObject) => {
    for (const d of dependantsOf(kind)) for (const key of d.keys(obj, caches.get(d.kind)!)) enqueue(d.kind, key);
  };
  // An id a loop accepted (or no longer does) wakes what refers to that resource, as a change of it would: an
  // acceptance after a restart changes no status, so no watch event would.
  const accepted = createAcceptedIds((kind, ns, name) => {
    const obj = caches.get(kind)?.get(ns, name);
    if (obj !== undefined) wakeDependants(kind, obj);
  });

  // One informer per kind: an event enqueues its own key and wakes what depends on it (wakeOn of other kinds).
  for (const reg of options.controllers) {
    const dependants = dependantsOf(reg.kind);
    const cache = makeInformers(reg.type, (event, obj) => {
      const key = keyOf(obj);
      if (event === "delete") accepted.forget(reg.kind, obj, { gone: true });
      indexRemote(reg.kind, obj, event === "delete");
      keepDerivedState(reg.kind, key, obj, event === "delete");
      enqueue(reg.kind, key);
      if (event === "delete") {
        if (obj.metadata.uid !== undefined) readyAt.delete(obj.metadata.uid);
        releaseCredentialsOf(obj);
      } else {
        noteReady(reg.kind, obj);
      }
      for (const d of dependants) for (const key of d.keys(obj, caches.get(d.kind)!)) enqueue(d.kind, key);
    });
    caches.set(reg.kind, { ...cache, withRemoteId: (id) => indexed(reg.kind, id, cache) });
  }
  const consumers = options.followConsumers === true ? followConsumers() : undefined;
  // Only the operator's own Secrets are cached (label selector): unrelated Secrets cost no memory.
  const secrets = makeInformers(
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

  /**
   * The consumer index, fed by one informer per workload kind and Pods. A change of a Secret's consumer wakes the
   * resource that publishes the Secret (its mds.dev/owner annotation, in the same namespace), so a rotation waiting
   * for a rollout moves on when it ends, not on a timer. Secrets the operator does not publish wake nothing.
   */
  function followConsumers(): ConsumerIndex {
    const index = createConsumerIndex();
    for (const type of [...workloadTypes, PodType])
      makeInformers(type, (event, obj) => {
        for (const key of index.update(type.kind, obj, event === "delete")) {
          const [ns, name] = splitKey(key);
          const owner = secrets.get(ns, name)?.metadata.annotations?.[annotations.owner] ?? "";
          const i = owner.indexOf("/");
          if (i > 0 && kinds.has(owner.slice(0, i))) enqueue(owner.slice(0, i), `${ns ?? ""}/${owner.slice(i + 1)}`);
        }
      });
    return index;
  }

  function noteReady(kind: string, obj: KubeObject) {
    const conds = (obj["status"] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
    const uid = obj.metadata.uid;
    if (uid === undefined || readyAt.has(uid)) return;
    if (conds?.some((c) => c.type === "Ready" && c.status === "True") && obj.metadata.creationTimestamp) {
      readyAt.set(uid, Date.now());
      metrics.timeToReady.observe(
        { kind },
        Math.max(0, (Date.now() - Date.parse(obj.metadata.creationTimestamp)) / 1000),
      );
    }
  }

  // The credentials Secrets the resources act with stay until the last resource that needs one to be deleted is gone.
  const loopFinalizers = new Set(options.controllers.map((k) => `${k.type.group}/finalizer`));
  const guard = createCredentialsGuard({
    kube,
    dependents: (namespace) =>
      [...caches.values()]
        .flatMap((c) => c.list(namespace))
        .filter((o) => (o.metadata.finalizers ?? []).some((f) => loopFinalizers.has(f))),
    namespaces,
    logger,
  });
  function releaseCredentialsOf(obj: KubeObject) {
    const secret = credentialsSecretOf(obj);
    const i = secret?.indexOf("/") ?? -1;
    if (secret === undefined || i < 0 || !options.canWrite()) return;
    guard
      .release(secret.slice(0, i), secret.slice(i + 1))
      .catch((err: unknown) => logger.warn({ err, secret }, "Could not release credentials Secret"));
  }
  let sweepTimer: NodeJS.Timeout | undefined;
  const sweep = () => {
    if (!options.canWrite()) return;
    guard.sweep().catch((err: unknown) => logger.warn({ err }, "Could not sweep credentials Secrets"));
    auditDeletionProtection();
  };
  // Watching chosen namespaces is the single-namespace install, which grants no cluster-scoped read: skip it there.
  let audited = false;
  const auditDeletionProtection = () => {
    audited = true;
    if (options.namespaces === undefined) void deletionProtection.run();
  };

  const pool = createCredentialPool({
    kube,
    protect: (secret) => guard.protect(secret),
    apiUrl: options.apiUrl,
    createApiClient,
    createMirror: options.remote.mirror,
    logger,
    pollIntervals: options.pollIntervals,
    onContexts: reportApiContexts(metrics),
    onRemoteChange: (_kind, id) => {
      for (const entry of byRemoteId.get(id) ?? []) {
        const [kind, key] = entry.split("|") as [string, string];
        enqueue(kind, key);
      }
    },
  });
  const context: ControllerContext<R> = {
    kube,
    pool,
    defaultCredentials: options.defaultCredentials,
    instanceId: options.instanceId,
    accepted,
    cache: (kind) => {
      const c = caches.get(kind);
      if (c === undefined) throw new Error(`kind ${kind} is not registered`);
      return c;
    },
    secrets,
    events: createEventRecorder(kube, logger, { instance: options.instanceId }),
    logger,
    pollIntervals: options.pollIntervals,
    crashPoint,
    consumers,
  };

  const deletionProtection = createDeletionProtectionAudit({
    kube,
    events: context.events,
    logger,
    objects: () =>
      [...deletionProtected].flatMap((entry) => {
        const i = entry.indexOf("|");
        const [ns, name] = splitKey(entry.slice(i + 1));
        const obj = caches.get(entry.slice(0, i))?.get(ns, name);
        return obj === undefined ? [] : [obj];
      }),
  });

  function worker(kind: string, queue: WorkQueue, reconcile: (key: string) => Promise<Outcome>) {
    return async (key: string) => {
      if (!options.canWrite()) {
        // Not the leader: keep the key for when we are (parked, not a retry; no reconcile is counted).
        queue.addAfter(key, notLeaderRequeueMs, { retry: false });
        return;
      }
      // The first reconcile as leader: a standby that takes over checks at once, not at the next sweep.
      if (!audited) auditDeletionProtection();
      const started = process.hrtime.bigint();
      let outcome: Outcome;
      try {
        outcome = await reconcile(key);
      } catch (err) {
        outcome = { type: "error", error: err };
      }
      const result =
        outcome.type !== "error"
          ? "success"
          : ((c) => (c.conflict ? "conflict" : c.terminal ? "terminal" : "error"))(classifyError(outcome.error));
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.reconcileDuration.observe({ kind, result }, seconds);
      recordControllerRuntime(metrics, controllerName(kind), outcome, result, seconds);
      applyOutcome(queue, key, outcome);
      metrics.queueDepth.set({ kind }, queue.depth());
    };
  }

  // Read on each scrape: the resources' conditions and rotation from their states (kept from the events), the queues' state.
  const stateSource: StateSource = {
    resources: (now) => [...states].map(([kind, byKey]) => summarizeStates(kind, byKey.values(), now)),
    queues: () =>
      [...queues.entries()].map(([kind, queue]) => ({ controller: controllerName(kind), stats: queue.stats() })),
    objectGauges: (now) => gaugeViews.flatMap(({ gauges, views }) => gauges.samples(views, context.cache, now)),
    deletionProtectionUnenforced: () => {
      const missing = deletionProtection.state() === "missing";
      const counts = new Map(options.controllers.map((k) => [k.kind, 0]));
      if (missing)
        for (const entry of deletionProtected) {
          const kind = entry.slice(0, entry.indexOf("|"));
          counts.set(kind, (counts.get(kind) ?? 0) + 1);
        }
      return [...counts].map(([kind, count]) => ({ kind, count }));
    },
  };
  let removeStateSource: (() => void) | undefined;

  let ready = false;
  let started = false;
  return {
    async start() {
      if (started) return;
      started = true;
      await Promise.all(informers.map((i) => i.start()));
      for (const reg of options.controllers) {
        const queue = queues.get(reg.kind)!;
        const workers = reg.workers?.(options.concurrency) ?? options.concurrency;
        initControllerRuntime(metrics, controllerName(reg.kind), workers);
        queue.start(worker(reg.kind, queue, reg.reconciler(context)), workers);
      }
      removeStateSource = metrics.state.add(stateSource);
      ready = true;
      // A resource that moved to other credentials, or went while no operator ran, left a guarded Secret behind.
      sweep();
      sweepTimer = setInterval(sweep, sweepIntervalMs(options.pollIntervals.slowMs));
      sweepTimer.unref();
      logger.info({ namespaces: options.namespaces ?? "all" }, "Operator started");
    },
    async stop() {
      ready = false;
      removeStateSource?.();
      clearInterval(sweepTimer);
      pool.stop();
      await Promise.all([...queues.values()].map((q) => q.stop()));
      await Promise.all(informers.map((i) => i.stop()));
      logger.info("Operator stopped");
    },
    isReady: () => ready && informers.every((i) => i.hasSynced()),
  };
}

/**
 * How often the credentials guard is swept after the sweep at start: the settled interval, but at most a minute, so a
 * standby that becomes leader (its sweeps were skipped) releases soon after (one list of the labelled Secrets).
 */
export function sweepIntervalMs(slowMs: number): number {
  return Math.min(slowMs, 60_000);
}

/** A controller's name in controller-runtime's metrics: its kind in lower case, as controller-runtime names it. */
function controllerName(kind: string): string {
  return kind.toLowerCase();
}

/** client-go's workqueue metrics of one controller's queue. */
function queueObserver(metrics: OperatorMetrics, controller: string): QueueObserver {
  const labels = { name: controller, controller };
  const w = metrics.workqueue;
  return {
    added: () => w.adds.inc(labels),
    retried: () => w.retries.inc(labels),
    started: (waited) => w.queueDuration.observe(labels, waited),
    finished: (worked) => w.workDuration.observe(labels, worked),
  };
}

/** controller-runtime's initMetrics: every result series exists from the start, at 0, so rates over them are defined. */
function initControllerRuntime(metrics: OperatorMetrics, controller: string, workers: number): void {
  const cr = metrics.controllerRuntime;
  for (const result of ["success", "error", "requeue", "requeue_after"])
    cr.reconcileTotal.inc({ controller, result }, 0);
  cr.reconcileErrors.inc({ controller }, 0);
  cr.terminalReconcileErrors.inc({ controller }, 0);
  cr.maxConcurrentReconciles.set({ controller }, workers);
}

/** controller-runtime's reconcileHandler bookkeeping: an error (terminal too) is an error; a requeue with a delay is requeue_after. */
function recordControllerRuntime(
  metrics: OperatorMetrics,
  controller: string,
  outcome: Outcome,
  result: string,
  seconds: number,
): void {
  const cr = metrics.controllerRuntime;
  cr.reconcileTime.observe({ controller }, seconds);
  if (outcome.type === "error") {
    cr.reconcileErrors.inc({ controller });
    if (result === "terminal") cr.terminalReconcileErrors.inc({ controller });
    cr.reconcileTotal.inc({ controller, result: "error" });
  } else {
    cr.reconcileTotal.inc({
      controller,
      result: outcome.type === "requeueAfter" && outcome.ms > 0 ? "requeue_after" : "success",
    });
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}

/** A process that lost its lease stops writing at once, even in the middle of a reconcile. */
class NotLeaderError extends ReconcileError {
  constructor(what: string) {
    super("ReconcileError", `${what} skipped: this replica is not the leader`);
    this.name = "NotLeaderError";
  }
}

/** The remote definition's write methods refuse to run on a replica that is not the leader. */
function gateApiWrites<Api extends object>(api: Api, writes: ReadonlySet<string>, canWrite: () => boolean): Api {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== "string" || typeof value !== "function" || !writes.has(prop)) return value;
      return (...args: unknown[]) => {
        if (!canWrite()) return Promise.reject(new NotLeaderError(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** Counts Kubernetes writes by verb and resource (zero in a steady-state resync is a benchmark goal) and refuses them without the lease. */
function countWrites(
  kube: KubeClient,
  counter: { inc(labels: { verb: string; resource: string }): void },
  canWrite: () => boolean,
): KubeClient {
  const gate = (verb: string, type: { plural: string }) => {
    if (!canWrite()) throw new NotLeaderError(`${verb} ${type.plural}`);
  };
  return {
    get: kube.get.bind(kube),
    list: kube.list.bind(kube),
    async create(type, obj) {
      gate("create", type);
      counter.inc({ verb: "create", resource: type.plural });
      return kube.create(type, obj);
    },
    async replace(type, obj) {
      gate("update", type);
      counter.inc({ verb: "update", resource: type.plural });
      return kube.replace(type, obj);
    },
    async patch(type, ns, name, patch) {
      gate("patch", type);
      counter.inc({ verb: "patch", resource: type.plural });
      return kube.patch(type, ns, name, patch);
    },
    async patchStatus(type, ns, name, patch) {
      gate("patch", type);
      counter.inc({ verb: "patch", resource: `${type.plural}/status` });
      return kube.patchStatus(type, ns, name, patch);
    },
    ...(kube.apply === undefined
      ? {}
      : {
          async apply(type, obj, manager) {
            gate("patch", type);
            counter.inc({ verb: "patch", resource: type.plural });
            return kube.apply!(type, obj, manager);
          },
        }),
    async delete(type, ns, name, o) {
      gate("delete", type);
      counter.inc({ verb: "delete", resource: type.plural });
      return kube.delete(type, ns, name, o);
    },
  };
}
