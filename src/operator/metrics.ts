import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { buildInfo, type BuildInfo } from "./build-info.ts";
import type { ObjectGauge, ObjectGaugeSample } from "./controller.ts";
import type { QueueStats } from "./work-queue.ts";

// The operator's Prometheus metrics. One registry per process (built in src/cli), passed down; every part of the
// operator records into the same named metrics through operatorMetrics(registry). Calls to the service API are
// counted by the client's own hooks in the same registry (mds_client_*: requests, attempts by HTTP status,
// throttled time, retries). Labels never carry secrets or unbounded values; the rules are in metric-labels.ts.

export function createMetricsRegistry(build: BuildInfo = buildInfo()): Registry {
  const registry = new Registry();
  // Unprefixed, as every Prometheus client library names them: process_* and nodejs_* dashboards work as they are.
  collectDefaultMetrics({ register: registry });
  // The info-metric convention (kube_*_info, prometheus_build_info): always 1, the facts in labels, so a query can
  // join on it or count the versions running during a roll.
  new Gauge({
    name: "mds_build_info",
    help: "The running operator's version and the commit it was built from (unknown when neither the build nor git says); always 1.",
    labelNames: ["version", "commit"],
    registers: [registry],
  }).set(build, 1);
  return registry;
}

export interface OperatorMetrics {
  /** Reconcile durations by kind and result (success, error, conflict, terminal). */
  reconcileDuration: Histogram<"kind" | "result">;
  /** Keys waiting in the work queue, by kind. */
  queueDepth: Gauge<"kind">;
  /** From a resource's creation to its first Ready=True, by kind. */
  timeToReady: Histogram<"kind">;
  /** Writes to the Kubernetes API by verb and resource; zero in a steady-state resync. */
  kubeWrites: Counter<"verb" | "resource">;
  /** 1 while this process holds the leader Lease (or runs without leader election). */
  leader: Gauge;
  /** controller-runtime's own metric names, so the dashboards and alerts made for every other controller show mds. */
  controllerRuntime: ControllerRuntimeMetrics;
  /** client-go's workqueue metrics under the names controller-runtime registers them. */
  workqueue: WorkqueueMetrics;
  /** What a running operator reports at scrape time (resources' conditions, rotation, its queues); see StateSource. */
  state: { add(source: StateSource): () => void };
  /** Live API contexts (one client and one polling mirror per distinct token): bounded, see credentials.ts. */
  apiContexts: Gauge;
  /** API contexts dropped, by why: refused (401), idle, rotated (its Secret holds another token), capacity. */
  apiContextEvictions: Counter<"reason">;
  /** client-go's leader election gauge: 1 while this process holds the Lease `name`, else 0 (with leader election only). */
  leaderElectionMasterStatus: Gauge<"name">;
  /** client-go's count of requests to the apiserver (src/kube), by status code ("<error>" for none), method and host. */
  restClientRequests: Counter<"code" | "method" | "host">;
}

// controller-runtime's pkg/internal/controller/metrics: one series per controller (the kind in lower case, as
// controller-runtime names a controller built For a kind), results success | error | requeue | requeue_after.
interface ControllerRuntimeMetrics {
  reconcileTotal: Counter<"controller" | "result">;
  reconcileErrors: Counter<"controller">;
  terminalReconcileErrors: Counter<"controller">;
  reconcileTime: Histogram<"controller">;
  maxConcurrentReconciles: Gauge<"controller">;
}

// controller-runtime's pkg/metrics/workqueue.go: `name` and `controller` both carry the controller's name.
interface WorkqueueMetrics {
  adds: Counter<"name" | "controller">;
  retries: Counter<"name" | "controller">;
  queueDuration: Histogram<"name" | "controller">;
  workDuration: Histogram<"name" | "controller">;
}

/** The resources of one kind, summarized at scrape time from the informer cache (resource-state.ts). */
export interface ResourceSummary {
  kind: string;
  /** How many resources have each (condition type, status, reason); Ready "Unknown" with reason "" when unset. */
  conditions: { type: string; status: string; reason: string; count: number }[];
  /** The longest a resource of this kind has been without Ready=True (since the transition, or its creation). */
  longestNotReadySeconds: number;
  /** Resources whose status.rotation.nextRotationTime has passed without a rotation. */
  rotationOverdue: number;
  /** Resources whose retiring connection is still there after status.rotation.retiring.revokeAt (or consumersDeadline). */
  retiringPastRevoke: number;
}

interface QueueSummary {
  controller: string;
  stats: QueueStats;
}

/** A running operator, read on each scrape (nothing is computed between scrapes). */
export interface StateSource {
  resources(now: number): ResourceSummary[];
  queues(): QueueSummary[];
  /** Per-object gauges the kinds report (Controller.objectGauges). */
  objectGauges?(now: number): ObjectGaugeSample[];
  /** Resources with spec.deletionProtection that nothing on the cluster enforces, by kind (every kind, 0 included). */
  deletionProtectionUnenforced?(): { kind: string; count: number }[];
}

/** controller-runtime's reconcile_time_seconds buckets. */
const reconcileTimeBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75,
  2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
/** client-go's workqueue latency buckets: 10 ns to 1000 s, ×10 each (ExponentialBuckets(10e-9, 10, 12)). */
const workqueueBuckets = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));

const cache = new WeakMap<Registry, OperatorMetrics>();

/** `objectGauges`: the kinds' per-object gauges (Controller.objectGauges); the first call for a registry declares them. */
// eslint-disable-next-line max-lines-per-function -- a declaration of every metric, one after the other; no logic
export function operatorMetrics(registry: Registry, objectGauges: ObjectGauge[] = []): OperatorMetrics {
  const cached = cache.get(registry);
  if (cached) return cached;
  const registers = [registry];
  const sources = new Set<StateSource>();
  const metrics: OperatorMetrics = {
    reconcileDuration: new Histogram({
      name: "mds_operator_reconcile_duration_seconds",
      help: "Duration of one reconcile, by kind and result.",
      labelNames: ["kind", "result"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    queueDepth: new Gauge({
      name: "mds_operator_queue_depth",
      help: "Keys waiting in the work queue, by kind.",
      labelNames: ["kind"],
      registers,
    }),
    timeToReady: new Histogram({
      name: "mds_operator_time_to_ready_seconds",
      help: "Time from a resource's creation to its first Ready=True, by kind.",
      labelNames: ["kind"],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers,
    }),
    kubeWrites: new Counter({
      name: "mds_operator_kube_writes_total",
      help: "Writes to the Kubernetes API, by verb and resource.",
      labelNames: ["verb", "resource"],
      registers,
    }),
    leader: new Gauge({
      name: "mds_operator_leader",
      help: "1 while this process is the leader (or runs without leader election), else 0.",
      registers,
    }),
    controllerRuntime: {
      reconcileTotal: new Counter({
        name: "controller_runtime_reconcile_total",
        help: "Total number of reconciliations per controller",
        labelNames: ["controller", "result"],
        registers,
      }),
      reconcileErrors: new Counter({
        name: "controller_runtime_reconcile_errors_total",
        help: "Total number of reconciliation errors per controller",
        labelNames: ["controller"],
        registers,
      }),
      terminalReconcileErrors: new Counter({
        name: "controller_runtime_terminal_reconcile_errors_total",
        help: "Total number of terminal reconciliation errors per controller",
        labelNames: ["controller"],
        registers,
      }),
      reconcileTime: new Histogram({
        name: "controller_runtime_reconcile_time_seconds",
        help: "Length of time per reconciliation per controller",
        labelNames: ["controller"],
        buckets: reconcileTimeBuckets,
        registers,
      }),
      maxConcurrentReconciles: new Gauge({
        name: "controller_runtime_max_concurrent_reconciles",
        help: "Maximum number of concurrent reconciles per controller",
        labelNames: ["controller"],
        registers,
      }),
    },
    workqueue: {
      adds: new Counter({
        name: "workqueue_adds_total",
        help: "Total number of adds handled by workqueue",
        labelNames: ["name", "controller"],
        registers,
      }),
      retries: new Counter({
        name: "workqueue_retries_total",
        help: "Total number of retries handled by workqueue",
        labelNames: ["name", "controller"],
        registers,
      }),
      queueDuration: new Histogram({
        name: "workqueue_queue_duration_seconds",
        help: "How long in seconds an item stays in workqueue before being requested",
        labelNames: ["name", "controller"],
        buckets: workqueueBuckets,
        registers,
      }),
      workDuration: new Histogram({
        name: "workqueue_work_duration_seconds",
        help: "How long in seconds processing an item from workqueue takes.",
        labelNames: ["name", "controller"],
        buckets: workqueueBuckets,
        registers,
      }),
    },
    state: { add: (source) => addSource(sources, source) },
    apiContexts: new Gauge({
      name: "mds_operator_api_contexts",
      help: "Live API contexts: one API client and one polling mirror per distinct token in use (bounded; idle and refused ones are dropped).",
      registers,
    }),
    apiContextEvictions: new Counter({
      name: "mds_operator_api_context_evictions_total",
      help: "API contexts dropped, by reason: refused (the service answered 401), idle, rotated (its Secret now holds another token), capacity.",
      labelNames: ["reason"],
      registers,
    }),
    leaderElectionMasterStatus: new Gauge({
      name: "leader_election_master_status",
      help: "1 while this replica holds the leader Lease `name`, 0 while it stands by (client-go's name; only with leader election).",
      labelNames: ["name"],
      registers,
    }),
    restClientRequests: new Counter({
      name: "rest_client_requests_total",
      help: "Requests to the Kubernetes API server by HTTP status code (<error> when none came), method and host (client-go's name).",
      labelNames: ["code", "method", "host"],
      registers,
    }),
  };
  registerStateGauges(registers, sources, objectGauges);
  cache.set(registry, metrics);
  return metrics;
}

function addSource(sources: Set<StateSource>, source: StateSource): () => void {
  sources.add(source);
  return () => sources.delete(source);
}

/**
 * The gauges computed on each scrape from the running operators' state: no bookkeeping between scrapes, and a
 * resource that is gone is simply not counted. One snapshot serves every gauge of the same scrape.
 */
// eslint-disable-next-line max-lines-per-function -- a declaration of the state gauges, one after the other; each collect function is short
function registerStateGauges(registers: Registry[], sources: Set<StateSource>, objectGauges: ObjectGauge[]): void {
  let snapshot:
    | {
        at: number;
        resources: ResourceSummary[];
        queues: QueueSummary[];
        objects: ObjectGaugeSample[];
        unenforced: { kind: string; count: number }[];
      }
    | undefined;
  const read = () => {
    const now = Date.now();
    // The gauges of one scrape are collected within a few milliseconds; a later scrape reads afresh.
    if (snapshot === undefined || now - snapshot.at > 250) {
      const all = [...sources];
      snapshot = {
        at: now,
        resources: all.flatMap((s) => s.resources(now)),
        queues: all.flatMap((s) => s.queues()),
        objects: all.flatMap((s) => s.objectGauges?.(now) ?? []),
        unenforced: all.flatMap((s) => s.deletionProtectionUnenforced?.() ?? []),
      };
    }
    return snapshot;
  };
  const gauge = <L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    fill: (g: Gauge<L>, s: ReturnType<typeof read>) => void,
  ) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        fill(this, read());
      },
    });

  gauge(
    "mds_operator_resource_conditions",
    "Resources by kind and condition (type, status, reason); Ready Unknown with no reason: not yet reconciled.",
    ["kind", "type", "status", "reason"],
    (g, s) => {
      for (const r of s.resources)
        for (const c of r.conditions)
          g.inc({ kind: r.kind, type: c.type, status: c.status, reason: c.reason }, c.count);
    },
  );
  for (const declared of objectGauges) {
    const [namespaceLabel, nameLabel] = declared.labels;
    gauge(declared.name, declared.help, [namespaceLabel, nameLabel], (g, s) => {
      for (const o of s.objects)
        if (o.metric === declared.name) g.set({ [namespaceLabel]: o.namespace, [nameLabel]: o.name }, o.value);
    });
  }
  gauge(
    "mds_operator_longest_not_ready_seconds",
    "The longest any resource of the kind has been without Ready=True (0 when all are ready).",
    ["kind"],
    (g, s) => {
      for (const r of s.resources) g.set({ kind: r.kind }, Math.max(r.longestNotReadySeconds, 0));
    },
  );
  gauge(
    "mds_operator_rotation_overdue",
    "Resources whose scheduled credentials rotation (status.rotation.nextRotationTime) has passed without one.",
    ["kind"],
    (g, s) => {
      for (const r of s.resources) g.set({ kind: r.kind }, r.rotationOverdue);
    },
  );
  gauge(
    "mds_operator_retiring_past_revoke",
    "Resources whose replaced connection still exists after its grace period (status.rotation.retiring.revokeAt; with rotation consumers, after consumersDeadline).",
    ["kind"],
    (g, s) => {
      for (const r of s.resources) g.set({ kind: r.kind }, r.retiringPastRevoke);
    },
  );
  gauge(
    "mds_operator_deletion_protection_unenforced",
    "Resources with spec.deletionProtection true that nothing on the cluster enforces (no mds-deletion-protection policy binding that denies): a delete or a prune would go through. Counted by the leader; 0 where the operator may not read the policies (single-namespace install).",
    ["kind"],
    (g, s) => {
      for (const u of s.unenforced) g.inc({ kind: u.kind }, u.count);
    },
  );
  // controller-runtime and client-go names (see ControllerRuntimeMetrics, WorkqueueMetrics).
  gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    (g, s) => {
      for (const q of s.queues) g.set({ controller: q.controller }, q.stats.active);
    },
  );
  gauge(
    "workqueue_depth",
    "Current depth of workqueue by workqueue and priority",
    ["name", "controller", "priority"],
    (g, s) => {
      for (const q of s.queues) g.set({ name: q.controller, controller: q.controller, priority: "" }, q.stats.ready);
    },
  );
  gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
    ["name", "controller"],
    (g, s) => {
      for (const q of s.queues) g.set({ name: q.controller, controller: q.controller }, q.stats.unfinishedSeconds);
    },
  );
  gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
    (g, s) => {
      for (const q of s.queues) g.set({ name: q.controller, controller: q.controller }, q.stats.longestRunningSeconds);
    },
  );
}

/** The credential pool's report (credentials.ts, onContexts): live contexts and each eviction with its reason. */
export function reportApiContexts(metrics: OperatorMetrics): (live: number, evicted?: string) => void {
  return (live, evicted) => {
    metrics.apiContexts.set(live);
    if (evicted !== undefined) metrics.apiContextEvictions.inc({ reason: evicted });
  };
}
