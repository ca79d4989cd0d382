import { Counter, Gauge, Histogram, Registry } from "prom-client";

export type Metrics = {
  registry: Registry;
  requests: Counter<"method" | "route" | "code">;
  duration: Histogram<"method" | "route">;
  jobsRunning: Gauge;
  jobs: Counter<"kind" | "outcome">;
};

export function createMetrics(): Metrics {
  const registry = new Registry();
  return {
    registry,
    requests: new Counter({
      name: "mds_http_requests_total",
      help: "HTTP requests by route and status code",
      labelNames: ["method", "route", "code"],
      registers: [registry],
    }),
    duration: new Histogram({
      name: "mds_http_request_duration_seconds",
      help: "HTTP request duration",
      labelNames: ["method", "route"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    jobsRunning: new Gauge({ name: "mds_jobs_running", help: "jobs being run by this replica", registers: [registry] }),
    jobs: new Counter({
      name: "mds_jobs_total",
      help: "finished job attempts by kind and outcome",
      labelNames: ["kind", "outcome"],
      registers: [registry],
    }),
  };
}
