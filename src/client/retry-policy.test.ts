import { describe, expect, it } from "vitest";
import { parseRetryAfter } from "./retry-after.ts";
import { computeBackoff, defaultRetryPolicy, mayRepeat, resolveRetryPolicy } from "./retry-policy.ts";

describe("parseRetryAfter", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  it("reads delay-seconds and HTTP dates", () => {
    expect(parseRetryAfter("7", now)).toBe(7000);
    expect(parseRetryAfter(" 0 ", now)).toBe(0);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter(["2", "9"], now)).toBe(2000);
  });
  it("treats a past date as now and ignores what it cannot read", () => {
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now)).toBe(0);
    for (const bad of [undefined, "", "-1", "1.5", "soon", "2026-01-01"])
      expect(parseRetryAfter(bad, now)).toBeUndefined();
  });
});

describe("backoff", () => {
  it("uses full jitter under a doubling ceiling capped at maxDelayMs", () => {
    const top = () => 0.999999;
    expect(computeBackoff(1, defaultRetryPolicy, top)).toBe(499);
    expect(computeBackoff(2, defaultRetryPolicy, top)).toBe(999);
    expect(computeBackoff(20, defaultRetryPolicy, top)).toBe(29_999);
    expect(computeBackoff(3, defaultRetryPolicy, () => 0)).toBe(0);
  });
  it("repeats a POST that may have reached the server only when the server announced Idempotency-Key replay", () => {
    const lost = { networkCode: "ECONNRESET" };
    expect(mayRepeat("POST", undefined, true, lost)).toBe(false);
    expect(mayRepeat("POST", "k", false, lost)).toBe(false);
    expect(mayRepeat("POST", "k", false, { status: 502 })).toBe(false);
    expect(mayRepeat("POST", "k", true, lost)).toBe(true);
    // The server did not act: a 429, a connection never made.
    expect(mayRepeat("POST", undefined, false, { status: 429 })).toBe(true);
    expect(mayRepeat("POST", "k", false, { networkCode: "ECONNREFUSED" })).toBe(true);
    for (const method of ["GET", "PATCH", "DELETE"]) expect(mayRepeat(method, undefined, false, lost)).toBe(true);
  });
  it("validates settings", () => {
    expect(resolveRetryPolicy({ maxAttempts: 2 }).maxAttempts).toBe(2);
    expect(() => resolveRetryPolicy({ maxAttempts: 1.5 })).toThrow("invalid client option retry.maxAttempts: 1.5");
    expect(() => resolveRetryPolicy({ minDelayMs: -1 })).toThrow("invalid client option retry.minDelayMs: -1");
  });
});
