import { describe, expect, it } from "vitest";
import { createMetricsRegistry, operatorMetrics, type StateSource } from "./metrics.ts";

// The names, types, labels and buckets of controller-runtime v0.2x (pkg/internal/controller/metrics/metrics.go and
// pkg/metrics/workqueue.go): dashboards and alerts written for any controller-runtime controller read these.
const controllerRuntime: Record<string, { type: string; labels: string[] }> = {
  controller_runtime_reconcile_total: { type: "counter", labels: ["controller", "result"] },
  controller_runtime_reconcile_errors_total: { type: "counter", labels: ["controller"] },
  controller_runtime_terminal_reconcile_errors_total: { type: "counter", labels: ["controller"] },
  controller_runtime_reconcile_time_seconds: { type: "histogram", labels: ["controller"] },
  controller_runtime_max_concurrent_reconciles: { type: "gauge", labels: ["controller"] },
  controller_runtime_active_workers: { type: "gauge", labels: ["controller"] },
  workqueue_depth: { type: "gauge", labels: ["name", "controller", "priority"] },
  workqueue_adds_total: { type: "counter", labels: ["name", "controller"] },
  workqueue_queue_duration_seconds: { type: "histogram", labels: ["name", "controller"] },
  workqueue_work_duration_seconds: { type: "histogram", labels: ["name", "controller"] },
  workqueue_unfinished_work_seconds: { type: "gauge", labels: ["name", "controller"] },
  workqueue_longest_running_processor_seconds: { type: "gauge", labels: ["name", "controller"] },
  workqueue_retries_total: { type: "counter", labels: ["name", "controller"] },
};

describe("operator metrics", () => {
  it("has controller-runtime's metric names, types and labels alongside mds_operator_*", async () => {
    const registry = createMetricsRegistry();
    operatorMetrics(registry);
    const all = await registry.getMetricsAsJSON();
    for (const [name, want] of Object.entries(controllerRuntime)) {
      const m = registry.getSingleMetric(name) as unknown as { labelNames: string[] } | undefined;
      expect({ name, type: all.find((x) => x.name === name)?.type, labels: m?.labelNames }).toEqual({
        name,
        type: want.type,
        labels: want.labels,
      });
    }
  });

  it("uses controller-runtime's buckets: reconcile time up to 60 s, the workqueue's 10 ns to 1000 s", async () => {
    const registry = createMetricsRegistry();
    const m = operatorMetrics(registry);
    m.controllerRuntime.reconcileTime.observe({ controller: "database" }, 0.2);
    m.workqueue.queueDuration.observe({ name: "database", controller: "database" }, 0.2);
    const text = await registry.metrics();
    const les = (name: string) =>
      [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"`, "gm"))].map((x) => x[1]);
    expect(les("controller_runtime_reconcile_time_seconds")).toHaveLength(41); // 40 buckets and +Inf
    expect(les("controller_runtime_reconcile_time_seconds").slice(0, 3)).toEqual(["0.005", "0.01", "0.025"]);
    expect(les("controller_runtime_reconcile_time_seconds").at(-2)).toBe("60");
    expect(les("workqueue_queue_duration_seconds")).toEqual([
      "1e-8",
      "1e-7",
      "0.000001",
      "0.00001",
      "0.0001",
      "0.001",
      "0.01",
      "0.1",
      "1",
      "10",
      "100",
      "1000",
      "+Inf",
    ]);
  });

  it("computes the state gauges at scrape time from the running operators, and forgets a stopped one", async () => {
    const registry = createMetricsRegistry();
    const m = operatorMetrics(registry);
    const source: StateSource = {
      resources: () => [
        {
          kind: "Database",
          conditions: [{ type: "Stalled", status: "True", reason: "InvalidSpec", count: 2 }],
          longestNotReadySeconds: 42,
          rotationOverdue: 1,
          retiringPastRevoke: 0,
        },
      ],
      queues: () => [
        {
          controller: "database",
          stats: { ready: 3, delayed: 7, active: 1, unfinishedSeconds: 5, longestRunningSeconds: 4 },
        },
      ],
    };
    const remove = m.state.add(source);
    const text = await registry.metrics();
    expect(text).toContain(
      'mds_operator_resource_conditions{kind="Database",type="Stalled",status="True",reason="InvalidSpec"} 2',
    );
    expect(text).toContain('mds_operator_longest_not_ready_seconds{kind="Database"} 42');
    expect(text).toContain('mds_operator_rotation_overdue{kind="Database"} 1');
    expect(text).toContain('workqueue_depth{name="database",controller="database",priority=""} 3');
    expect(text).toContain('workqueue_longest_running_processor_seconds{name="database",controller="database"} 4');
    expect(text).toContain('controller_runtime_active_workers{controller="database"} 1');
    remove();
    await new Promise((r) => setTimeout(r, 300));
    expect(await registry.metrics()).not.toContain('kind="Database"');
  });
});
