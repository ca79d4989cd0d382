import { describe, expect, it } from "vitest";
import type { Clock } from "./clock.ts";
import { RateBudget, sharedRateBudget } from "./rate-budget.ts";

function testClock(): Clock & { sleeps: number[] } {
  let now = 1_000_000;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    sleep: async (ms, signal) => {
      signal?.throwIfAborted();
      sleeps.push(ms);
      now += ms;
    },
  };
}

describe("RateBudget", () => {
  it("lets a burst through, then holds callers to the rate", async () => {
    const clock = testClock();
    const budget = new RateBudget({ requestsPerSecond: 10, burst: 20, clock });
    const started = clock.now();
    for (let i = 0; i < 20; i++) expect(await budget.acquire()).toBe(0);
    expect(clock.now()).toBe(started);
    for (let i = 0; i < 30; i++) await budget.acquire();
    // 30 more requests at 10/s take 3 s of waiting.
    expect(clock.now() - started).toBe(3000);
  });

  it("never exceeds the rate over a long run", async () => {
    const clock = testClock();
    const budget = new RateBudget({ requestsPerSecond: 1, burst: 1, clock });
    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      await budget.acquire();
      times.push(clock.now());
    }
    for (let i = 1; i < times.length; i++) expect((times[i] ?? 0) - (times[i - 1] ?? 0)).toBeGreaterThanOrEqual(1000);
  });

  it("holds every caller until a pause ends, and a shorter pause never cuts a longer one", async () => {
    const clock = testClock();
    const budget = new RateBudget({ clock });
    budget.pauseUntil(clock.now() + 5000);
    budget.pauseUntil(clock.now() + 1000);
    expect(await budget.acquire()).toBe(5000);
    expect(await budget.acquire()).toBe(0);
  });

  it("stops waiting when the signal aborts", async () => {
    const clock = testClock();
    const budget = new RateBudget({ clock });
    budget.pauseUntil(clock.now() + 5000);
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await expect(budget.acquire(controller.signal)).rejects.toThrow("stop");
  });

  it("rejects nonsense settings", () => {
    const clock = testClock();
    expect(() => new RateBudget({ requestsPerSecond: 0, clock })).toThrow("invalid client option rateLimit.requestsPerSecond: 0");
    expect(() => new RateBudget({ burst: 0.5, clock })).toThrow("invalid client option rateLimit.burst: 0.5");
  });

  it("shares one budget per credential identity", () => {
    const clock = testClock();
    const a = sharedRateBudget("http://svc|token:abc", {}, clock);
    expect(sharedRateBudget("http://svc|token:abc", { requestsPerSecond: 99 }, clock)).toBe(a);
    expect(sharedRateBudget("http://svc|token:other", {}, clock)).not.toBe(a);
  });
});
