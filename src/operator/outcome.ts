import { classifyError } from "./errors.ts";
import type { WorkQueue } from "./work-queue.ts";

// The result of one reconcile, as plain data. `applyOutcome` is the one place that turns it into a requeue.
export type Outcome =
  | { type: "done" }
  | { type: "requeueAfter"; ms: number }
  | { type: "error"; error: unknown };

export const done = (): Outcome => ({ type: "done" });
export const requeueAfter = (ms: number): Outcome => ({ type: "requeueAfter", ms });
export const failed = (error: unknown): Outcome => ({ type: "error", error });

/**
 * - success: reset the key's backoff; requeue after the poll interval (or not at all);
 * - Kubernetes 409: silently; the watch event requeues at once, a short bounded backoff is the safety net;
 * - terminal error (invalid spec): no retry; the next spec change enqueues the key again;
 * - other errors: per-key exponential backoff with jitter (1 s → 5 min), or the service's Retry-After if longer;
 *   waiting on something the user creates (credentials Secret, project, database) is retried at least every 30 s.
 */
export function applyOutcome(queue: WorkQueue, key: string, outcome: Outcome): void {
  switch (outcome.type) {
    case "done":
      queue.forget(key);
      return;
    case "requeueAfter":
      queue.forget(key);
      queue.addAfter(key, outcome.ms);
      return;
    case "error": {
      const c = classifyError(outcome.error);
      if (c.conflict) {
        // The watch event of whoever wrote first brings the key back at once with the fresh object; this delayed
        // retry is the safety net, bounded so a cache that stays stale (a watch reconnecting) is no hot loop.
        queue.addRateLimited(key, { maxMs: 5_000 });
        return;
      }
      if (c.terminal) {
        queue.forget(key);
        return;
      }
      queue.addRateLimited(key, { minMs: c.retryAfterMs, maxMs: c.maxDelayMs });
      return;
    }
  }
}
