import { ReconcileError, classifyError } from "./errors.ts";
import { backoffDelay, type WorkQueue } from "./work-queue.ts";

// The result of one reconcile, as plain data, and every retry rule of the operator: `applyOutcome` turns an outcome
// into a requeue, `retryInProcess` is the only retry inside a reconcile. Nothing else waits or backs off.
export type Outcome = { type: "done" } | { type: "requeueAfter"; ms: number } | { type: "error"; error: unknown };

export const done = (): Outcome => ({ type: "done" });
export const requeueAfter = (ms: number): Outcome => ({ type: "requeueAfter", ms });
export const failed = (error: unknown): Outcome => ({ type: "error", error });

/** A replica without the lease keeps its keys for when it gets it, without spinning. */
export const notLeaderRequeueMs = 2_000;

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
        if (c.retryAfterMs !== undefined) queue.addAfter(key, c.retryAfterMs);
        return;
      }
      queue.addRateLimited(key, { minMs: c.retryAfterMs, maxMs: c.maxDelayMs });
      return;
    }
  }
}

/**
 * Retries a Kubernetes write inside one reconcile, for the writes that must not wait for a requeue: the Secret that
 * holds the only copy of a creation response's credentials, a restore's ledger entry that must precede its POST.
 * Backoff 400 ms, 800 ms, … with jitter; a ReconcileError (a refusal that retrying cannot fix) is thrown at once.
 */
export async function retryInProcess<T>(
  fn: () => Promise<T>,
  options: {
    attempts?: number;
    retryable?: (err: unknown) => boolean;
    onRetry?: (err: unknown, attempt: number) => void;
  } = {},
): Promise<T> {
  const attempts = options.attempts ?? 5;
  const retryable = options.retryable ?? ((err: unknown) => !(err instanceof ReconcileError));
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= attempts || !retryable(err)) throw err;
      options.onRetry?.(err, attempt);
      await new Promise((resolve) => setTimeout(resolve, backoffDelay(attempt, { baseMs: 200, maxMs: 5_000 })));
    }
  }
}
