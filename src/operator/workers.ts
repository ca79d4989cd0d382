import type { Controller, ControllerContext } from "./controller.ts";
import type { RemoteState } from "./credentials.ts";
import {
  controllerName,
  initControllerRuntime,
  queueObserver,
  recordControllerRuntime,
} from "./controller-runtime-metrics.ts";
import { classifyError } from "./errors.ts";
import type { OperatorMetrics } from "./metrics.ts";
import { applyOutcome, notLeaderRequeueMs, type Outcome } from "./outcome.ts";
import { createWorkQueue, type WorkQueue } from "./work-queue.ts";

// The worker runner: one work queue per kind, and its workers, which reconcile a key while this replica is the leader
// and park it otherwise, time each reconcile into the metrics and turn its outcome into a requeue (outcome.ts).

/** One queue per controller's kind. */
export function createQueues(
  controllers: readonly Pick<Controller, "kind">[],
  metrics: OperatorMetrics,
  order: "namespaces" | "fifo",
): Map<string, WorkQueue> {
  return new Map(
    controllers.map((k) => [
      k.kind,
      createWorkQueue(undefined, queueObserver(metrics, controllerName(k.kind)), { order }),
    ]),
  );
}

/** Starts each controller's workers on its queue: `--concurrency` of them unless the kind asks for another number. */
export function startWorkers<R extends RemoteState>(args: {
  controllers: readonly Controller<R>[];
  queues: ReadonlyMap<string, WorkQueue>;
  context: ControllerContext<R>;
  concurrency: number;
  metrics: OperatorMetrics;
  canWrite: () => boolean;
  /** Called before each reconcile this replica runs as leader. */
  asLeader: () => void;
}): void {
  for (const reg of args.controllers) {
    const queue = args.queues.get(reg.kind)!;
    const workers = reg.workers?.(args.concurrency) ?? args.concurrency;
    initControllerRuntime(args.metrics, controllerName(reg.kind), workers);
    queue.start(worker(reg.kind, queue, reg.reconciler(args.context), args), workers);
  }
}

function worker(
  kind: string,
  queue: WorkQueue,
  reconcile: (key: string) => Promise<Outcome>,
  args: { metrics: OperatorMetrics; canWrite: () => boolean; asLeader: () => void },
) {
  return async (key: string) => {
    if (!args.canWrite()) {
      // Not the leader: keep the key for when we are (parked, not a retry; no reconcile is counted).
      queue.addAfter(key, notLeaderRequeueMs, { retry: false });
      return;
    }
    args.asLeader();
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
    args.metrics.reconcileDuration.observe({ kind, result }, seconds);
    recordControllerRuntime(args.metrics, controllerName(kind), outcome, result, seconds);
    applyOutcome(queue, key, outcome);
    args.metrics.queueDepth.set({ kind }, queue.depth());
  };
}
