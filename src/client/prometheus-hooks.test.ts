import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { prometheusHooks } from "./prometheus-hooks.ts";

describe("prometheusHooks", () => {
  it("counts calls, attempts, retries and throttled time, once per registry", async () => {
    const registry = new Registry();
    const hooks = prometheusHooks(registry);
    expect(prometheusHooks(registry)).toBe(hooks);
    hooks.onAttempt?.({
      operation: "getDatabase",
      method: "GET",
      attempt: 1,
      status: 503,
      outcome: "unavailable",
      durationMs: 5,
    });
    hooks.onRetry?.({ operation: "getDatabase", attempt: 1, outcome: "unavailable", status: 503, delayMs: 250 });
    hooks.onThrottled?.({ operation: "getDatabase", waitedMs: 1500 });
    hooks.onAttempt?.({ operation: "getDatabase", method: "GET", attempt: 2, outcome: "timeout", durationMs: 5 });
    hooks.onRequest?.({ operation: "getDatabase", method: "GET", outcome: "timeout", attempts: 2, durationMs: 2000 });
    const text = await registry.metrics();
    expect(text).toContain('mds_client_requests_total{operation="getDatabase",outcome="timeout"} 1');
    expect(text).toContain('mds_client_attempts_total{operation="getDatabase",status="503"} 1');
    expect(text).toContain('mds_client_attempts_total{operation="getDatabase",status="timeout"} 1');
    expect(text).toContain('mds_client_retries_total{operation="getDatabase",outcome="unavailable"} 1');
    expect(text).toContain('mds_client_throttled_seconds_total{operation="getDatabase"} 1.5');
  });
});
