import { describe, expect, it } from "vitest";
import type { Clock } from "./clock.ts";
import { RateBudget, sharedRateBudget } from "./rate-budget.ts";

/** A fake clock that wakes sleepers one at a time in time order, advancing to each wake-up. */
function testClock(): Clock & { sleeps: number[] } {
  let now = 1_000_000;
  const sleeps: number[] = [];
  const timers: { at: number; resolve: () => void }[] = [];
  let pumping = false;
  const pump = (): void => {
    pumping = false;
    timers.sort((x, y) => x.at - y.at);
    const next = timers.shift();
    if (next === undefined) return;
    now = Math.max(now, next.at);
    next.resolve();
    schedule();
  };
  const schedule = (): void => {
    if (pumping || timers.length === 0) return;
    pumping = true;
    setImmediate(pump);
  };
  return {
    sleeps,
    now: () => now,
    sleep: (ms, signal) => {
      signal?.throwIfAborted();
      sleeps.push(ms);
      return new Promise<void>((resolve) => {
        timers.push({ at: now + ms, resolve });
        schedule();
      });
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

  it("holds every caller until a pause ends, then resumes at the rate without a burst", async () => {
    const clock = testClock();
    const budget = new RateBudget({ clock });
    const start = clock.now();
    budget.pauseUntil(start + 5000);
    // A shorter pause never cuts a longer one.
    budget.pauseUntil(start + 1000);
    const done = await Promise.all([budget.acquire(), budget.acquire(), budget.acquire()]);
    expect(done).toEqual([5000, 5100, 5200]);
  });

  it("serves concurrent waiters in arrival order, one timer each", async () => {
    const clock = testClock();
    const budget = new RateBudget({ requestsPerSecond: 10, burst: 1, clock });
    const order: number[] = [];
    await Promise.all(Array.from({ length: 5 }, (_, i) => budget.acquire().then(() => order.push(i))));
    expect(order).toEqual([0, 1, 2, 3, 4]);
    // One sleep per waiter that had to wait: no re-polling.
    expect(clock.sleeps).toEqual([100, 200, 300, 400]);
  });

  it("sends nothing during a pause set while callers already wait for their slot", async () => {
    const clock = testClock();
    const budget = new RateBudget({ requestsPerSecond: 1, burst: 1, clock });
    await budget.acquire();
    const waiting = budget.acquire();
    budget.pauseUntil(clock.now() + 10_000);
    expect(await waiting).toBeGreaterThanOrEqual(10_000);
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
    expect(() => new RateBudget({ requestsPerSecond: 0, clock })).toThrow(
      "invalid client option rateLimit.requestsPerSecond: 0",
    );
    expect(() => new RateBudget({ burst: 0.5, clock })).toThrow("invalid client option rateLimit.burst: 0.5");
  });

  it("shares one budget per credential identity", () => {
    const clock = testClock();
    const a = sharedRateBudget("http://svc|token:abc", {}, clock);
    expect(sharedRateBudget("http://svc|token:abc", { requestsPerSecond: 99 }, clock)).toBe(a);
    expect(sharedRateBudget("http://svc|token:other", {}, clock)).not.toBe(a);
  });
});
