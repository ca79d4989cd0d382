import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { createClient, prometheusHooks, type ClientHooks } from "../client/index.ts";
import { createKubeClient, type KubeClient } from "../kube/client.ts";
import { createInformer, type Informer } from "../kube/informer.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";
import { SecretType, type KubeObject, type Secret } from "../kube/types.ts";
import { databaseKind, remoteIdOf, type KindDeps } from "../resources/database/controller.ts";
import { createRestoreReconciler } from "../resources/database-restore/controller.ts";
import { projectKind } from "../resources/project/controller.ts";
import { DatabaseRestoreType, DatabaseType, ProjectType } from "../resources/types.ts";
import type { CreateApiClient, MdsApi } from "./api.ts";
import { annotations, managedSecretSelector } from "./connection-secret.ts";
import { createCredentialPool } from "./credentials.ts";
import { createEventRecorder } from "./events.ts";
import { reconcileManaged, type LoopDeps, type ManagedKind, type ManagedObject } from "./managed-reconciler.ts";
import { operatorMetrics } from "./metrics.ts";
import { applyOutcome, type Outcome } from "./outcome.ts";
import { createWorkQueue, type WorkQueue } from "./work-queue.ts";
import { ReconcileError, classifyError } from "./errors.ts";

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  apiUrl: string;
  /** The operator's own API token Secret. */
  defaultCredentials: { secretNamespace: string; secretName: string; key: string };
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
  /**
   * How long after requestedAt a restore may still be re-sent with its Idempotency-Key after a restart (the
   * service replays for 24 h; default 23 h). Past it, the outcome is unknowable: Failed/OutcomeUnknown.
   */
  restoreReplayWindowMs?: number;
  /** Test seam: the API client of one credential (default: src/client with Prometheus hooks). */
  createApiClient?: CreateApiClient;
  /** Test seam: the Kubernetes client (default: built from kubeConfig). */
  kube?: KubeClient;
}

export interface Operator {
  start(): Promise<void>;
  stop(): Promise<void>;
  isReady(): boolean;
}

type Cache = { get(namespace: string | undefined, name: string): KubeObject | undefined; list(namespace?: string): KubeObject[] };

export function createOperator(options: OperatorOptions): Operator {
  const logger = options.logger;
  const metrics = operatorMetrics(options.metrics);
  const kube = countWrites(options.kube ?? createKubeClient(options.kubeConfig), metrics.kubeWrites, options.canWrite);
  const namespaces = options.namespaces ?? [undefined];
  const crashPoint = options.crashPoint ?? (() => {});
  const createApiClient: CreateApiClient = (o) => gateApiWrites(buildApiClient(o), options.canWrite);
  const buildApiClient: CreateApiClient =
    options.createApiClient ??
    (({ baseUrl, token }) =>
      createClient({
        baseUrl,
        token,
        hooks: apiHooks,
        logger: logger.child({ component: "mds-client" }),
        ...(options.apiRateLimit === undefined ? {} : { rateLimit: options.apiRateLimit }),
      }));

  // API calls, attempts, retries and throttled time by operation: the client's mds_client_* metrics.
  const apiHooks: ClientHooks = prometheusHooks(options.metrics);

  const queues = { Project: createWorkQueue(), Database: createWorkQueue(), DatabaseRestore: createWorkQueue() };
  const informers: Informer<KubeObject>[] = [];
  const byRemoteId = new Map<string, Set<string>>(); // remote id → "Kind|ns/name"
  const readyAt = new Map<string, number>();

  function indexRemote(kind: "Project" | "Database", obj: KubeObject, deleted: boolean) {
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

  function makeInformers(type: typeof ProjectType, onEvent: (event: "add" | "update" | "delete", obj: KubeObject) => void, labelSelector?: string): Cache {
    const parts = namespaces.map((namespace) =>
      createInformer<KubeObject>({
        kubeConfig: options.kubeConfig,
        client: kube,
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

  const projects = makeInformers(ProjectType, (event, obj) => {
    indexRemote("Project", obj, event === "delete");
    queues.Project.add(keyOf(obj));
    if (event === "delete") {
      if (obj.metadata.uid !== undefined) readyAt.delete(obj.metadata.uid);
    } else {
      noteReady("Project", obj);
    }
    // Databases wait for their project's id: wake them when it changes.
    for (const db of databases.list(obj.metadata.namespace ?? "")) {
      const spec = db["spec"] as { projectRef?: { name: string } } | undefined;
      if (db.metadata.namespace === obj.metadata.namespace && spec?.projectRef?.name === obj.metadata.name) queues.Database.add(keyOf(db));
    }
  });
  const databases: Cache = makeInformers(DatabaseType, (event, obj) => {
    indexRemote("Database", obj, event === "delete");
    queues.Database.add(keyOf(obj));
    if (event === "delete") {
      if (obj.metadata.uid !== undefined) readyAt.delete(obj.metadata.uid);
    } else {
      noteReady("Database", obj);
    }
    for (const r of restores.list(obj.metadata.namespace ?? "")) {
      const phase = (r["status"] as { phase?: string } | undefined)?.phase;
      if (r.metadata.namespace === obj.metadata.namespace && (phase === undefined || phase === "Pending" || phase === "Running")) queues.DatabaseRestore.add(keyOf(r));
    }
  });
  const restores: Cache = makeInformers(DatabaseRestoreType, (event, obj) => {
    if (event !== "delete") queues.DatabaseRestore.add(keyOf(obj));
  });
  // Only the operator's own Secrets are cached (label selector): unrelated Secrets cost no memory.
  const secrets = makeInformers(
    SecretType,
    (_event, obj) => {
      // A deleted or edited Secret wakes the resource that publishes it (annotation, as Retain Secrets have no owner).
      const [kind, name] = (obj.metadata.annotations?.[annotations.owner] ?? "").split("/");
      if (name !== undefined && name !== "" && (kind === "Database" || kind === "Project")) queues[kind].add(`${obj.metadata.namespace}/${name}`);
      for (const ref of obj.metadata.ownerReferences ?? []) {
        if (ref.kind === "Database" || ref.kind === "Project") queues[ref.kind].add(`${obj.metadata.namespace}/${ref.name}`);
      }
    },
    managedSecretSelector,
  ) as Cache & { get(ns: string | undefined, name: string): Secret | undefined; list(namespace?: string): Secret[] };

  function noteReady(kind: string, obj: KubeObject) {
    const conds = (obj["status"] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
    const uid = obj.metadata.uid;
    if (uid === undefined || readyAt.has(uid)) return;
    if (conds?.some((c) => c.type === "Ready" && c.status === "True") && obj.metadata.creationTimestamp) {
      readyAt.set(uid, Date.now());
      metrics.timeToReady.observe({ kind }, Math.max(0, (Date.now() - Date.parse(obj.metadata.creationTimestamp)) / 1000));
    }
  }

  const pool = createCredentialPool({
    kube,
    apiUrl: options.apiUrl,
    createApiClient,
    logger,
    pollIntervals: options.pollIntervals,
    onRemoteChange: (_kind, id) => {
      for (const entry of byRemoteId.get(id) ?? []) {
        const [kind, key] = entry.split("|") as ["Project" | "Database", string];
        queues[kind].add(key);
      }
    },
  });
  const events = createEventRecorder(kube, logger, { instance: options.instanceId });
  const kindDeps: KindDeps = {
    pool,
    defaultCredentials: options.defaultCredentials,
    instanceId: options.instanceId,
    projects,
    databases,
  };

  function loopDeps(kind: string, objects: Cache): LoopDeps {
    return {
      kube,
      objects,
      secrets,
      events,
      logger: logger.child({ controller: `managed/${kind.toLowerCase()}` }),
      pollIntervals: options.pollIntervals,
      crashPoint,
    };
  }

  const reconcileRestore = createRestoreReconciler({
    kube,
    databases,
    secrets,
    pool,
    defaultCredentials: options.defaultCredentials,
    events,
    logger: logger.child({ controller: "managed/databaserestore" }),
    pollIntervals: options.pollIntervals,
    crashPoint,
    ...(options.restoreReplayWindowMs === undefined ? {} : { replayWindowMs: options.restoreReplayWindowMs }),
  });

  function worker(kind: keyof typeof queues, reconcile: (key: string) => Promise<Outcome>) {
    const queue: WorkQueue = queues[kind];
    return async (key: string) => {
      if (!options.canWrite()) {
        // Not the leader: keep the key for when we are.
        queue.addAfter(key, 2_000);
        return;
      }
      const started = process.hrtime.bigint();
      let outcome: Outcome;
      try {
        outcome = await reconcile(key);
      } catch (err) {
        outcome = { type: "error", error: err };
      }
      const result = outcome.type !== "error" ? "success" : ((c) => (c.conflict ? "conflict" : c.terminal ? "terminal" : "error"))(classifyError(outcome.error));
      metrics.reconcileDuration.observe({ kind, result }, Number(process.hrtime.bigint() - started) / 1e9);
      applyOutcome(queue, key, outcome);
      metrics.queueDepth.set({ kind }, queue.depth());
    };
  }

  function managed<T extends ManagedObject>(kind: ManagedKind<T>, objects: Cache) {
    const deps = loopDeps(kind.kind, objects);
    return (key: string) => reconcileManaged(deps, kind, key);
  }

  let ready = false;
  let started = false;
  return {
    async start() {
      if (started) return;
      started = true;
      await Promise.all(informers.map((i) => i.start()));
      queues.Project.start(worker("Project", managed(projectKind(kindDeps), projects)), options.concurrency);
      queues.Database.start(worker("Database", managed(databaseKind(kindDeps), databases)), options.concurrency);
      queues.DatabaseRestore.start(worker("DatabaseRestore", reconcileRestore), Math.max(1, Math.min(options.concurrency, 2)));
      ready = true;
      logger.info({ namespaces: options.namespaces ?? "all" }, "Operator started");
    },
    async stop() {
      ready = false;
      pool.stop();
      await Promise.all(Object.values(queues).map((q) => q.stop()));
      await Promise.all(informers.map((i) => i.stop()));
      logger.info("Operator stopped");
    },
    isReady: () => ready && informers.every((i) => i.hasSynced()),
  };
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}

/** A process that lost its lease stops writing at once, even in the middle of a reconcile. */
export class NotLeaderError extends ReconcileError {
  constructor(what: string) {
    super("ReconcileError", `${what} skipped: this replica is not the leader`);
    this.name = "NotLeaderError";
  }
}

// Typed by the interface, so a renamed write method cannot slip past the gate.
const apiWrites = new Set<string>(["createProject", "deleteProject", "createDatabase", "updateDatabase", "deleteDatabase", "restoreDatabase", "createConnection", "deleteConnection"] satisfies (keyof MdsApi)[]);

function gateApiWrites(api: MdsApi, canWrite: () => boolean): MdsApi {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== "string" || typeof value !== "function" || !apiWrites.has(prop)) return value;
      return (...args: unknown[]) => {
        if (!canWrite()) return Promise.reject(new NotLeaderError(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** Counts Kubernetes writes by verb and resource (zero in a steady-state resync is a benchmark goal) and refuses them without the lease. */
function countWrites(kube: KubeClient, counter: { inc(labels: { verb: string; resource: string }): void }, canWrite: () => boolean): KubeClient {
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
    async delete(type, ns, name, o) {
      gate("delete", type);
      counter.inc({ verb: "delete", resource: type.plural });
      return kube.delete(type, ns, name, o);
    },
  };
}
