import type { OperatorMetrics } from "./metrics.ts";
import type { Outcome } from "./outcome.ts";
import type { QueueObserver } from "./work-queue.ts";

// The series controller-runtime and client-go's workqueue export, kept the way they keep them, so dashboards and
// alerts written for any controller read mds's too (docs/metrics.md).

/** A controller's name in controller-runtime's metrics: its kind in lower case, as controller-runtime names it. */
export function controllerName(kind: string): string {
  return kind.toLowerCase();
}

/** client-go's workqueue metrics of one controller's queue. */
export function queueObserver(metrics: OperatorMetrics, controller: string): QueueObserver {
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
export function initControllerRuntime(metrics: OperatorMetrics, controller: string, workers: number): void {
  const cr = metrics.controllerRuntime;
  for (const result of ["success", "error", "requeue", "requeue_after"])
    cr.reconcileTotal.inc({ controller, result }, 0);
  cr.reconcileErrors.inc({ controller }, 0);
  cr.terminalReconcileErrors.inc({ controller }, 0);
  cr.maxConcurrentReconciles.set({ controller }, workers);
}

/** controller-runtime's reconcileHandler bookkeeping: an error (terminal too) is an error; a requeue with a delay is requeue_after. */
export function recordControllerRuntime(
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
