import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

// The operator's Prometheus metrics. One registry per process (built in src/cli), passed down; every part of the
// operator records into the same named metrics through operatorMetrics(registry). Calls to the service API are
// counted by the client's own hooks in the same registry (mds_client_*: requests, attempts by HTTP status,
// throttled time, retries). Labels never carry secrets or unbounded values (no object names, no ids).

export function createMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "mds_operator_" });
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
  /** Live API contexts (one client and one polling mirror per distinct token): bounded, see credentials.ts. */
  apiContexts: Gauge;
  /** API contexts dropped, by why: refused (401), idle, rotated (its Secret holds another token), capacity. */
  apiContextEvictions: Counter<"reason">;
}

const cache = new WeakMap<Registry, OperatorMetrics>();

export function operatorMetrics(registry: Registry): OperatorMetrics {
  const cached = cache.get(registry);
  if (cached) return cached;
  const registers = [registry];
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
  };
  cache.set(registry, metrics);
  return metrics;
}

/** The credential pool's report (credentials.ts, onContexts): live contexts and each eviction with its reason. */
export function reportApiContexts(metrics: OperatorMetrics): (live: number, evicted?: string) => void {
  return (live, evicted) => {
    metrics.apiContexts.set(live);
    if (evicted !== undefined) metrics.apiContextEvictions.inc({ reason: evicted });
  };
}
