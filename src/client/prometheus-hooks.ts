import { Counter, Histogram, type Registry } from "prom-client";
import type { ClientHooks } from "./hooks.ts";

// One set of metrics per registry, however many clients (one per credential) report into it.
const hooksByRegistry = new WeakMap<Registry, ClientHooks>();

/**
 * Client metrics in a prom-client registry: calls and attempts by operation and outcome,
 * call duration, time held by the rate budget, retries.
 */
export function prometheusHooks(registry: Registry, prefix = "mds_client_"): ClientHooks {
  const existing = hooksByRegistry.get(registry);
  if (existing !== undefined) return existing;
  const registers = [registry];
  const requests = new Counter({
    name: `${prefix}requests_total`,
    help: "Client calls by operation and final outcome (ok or error code)",
    labelNames: ["operation", "outcome"] as const,
    registers,
  });
  const duration = new Histogram({
    name: `${prefix}request_duration_seconds`,
    help: "Client call duration, retries and waits included",
    labelNames: ["operation"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const attempts = new Counter({
    name: `${prefix}attempts_total`,
    help: "HTTP attempts by operation and HTTP status (or client error code)",
    labelNames: ["operation", "status"] as const,
    registers,
  });
  const throttled = new Counter({
    name: `${prefix}throttled_seconds_total`,
    help: "Time calls were held by the shared rate budget (token bucket or 429 pause)",
    labelNames: ["operation"] as const,
    registers,
  });
  const retries = new Counter({
    name: `${prefix}retries_total`,
    help: "Retries by operation and the outcome that caused them",
    labelNames: ["operation", "outcome"] as const,
    registers,
  });
  const skipped = new Counter({
    name: `${prefix}unreadable_items_total`,
    help: "List items left out of their page because the client could not read them (logged once each, without values)",
    labelNames: ["operation"] as const,
    registers,
  });
  const hooks: ClientHooks = {
    onRequest: (e) => {
      requests.inc({ operation: e.operation, outcome: e.outcome });
      duration.observe({ operation: e.operation }, e.durationMs / 1000);
    },
    onAttempt: (e) =>
      attempts.inc({ operation: e.operation, status: e.status === undefined ? e.outcome : String(e.status) }),
    onThrottled: (e) => throttled.inc({ operation: e.operation }, e.waitedMs / 1000),
    onRetry: (e) => retries.inc({ operation: e.operation, outcome: e.outcome }),
    onSkippedItem: (e) => skipped.inc({ operation: e.operation }),
  };
  hooksByRegistry.set(registry, hooks);
  return hooks;
}
