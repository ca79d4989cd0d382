import { describe, expect, it, vi } from "vitest";
import { backoffDelay, createWorkQueue } from "./work-queue.ts";
import { applyOutcome, failed, requeueAfter } from "./outcome.ts";
import { TerminalError } from "./errors.ts";
import { KubeConflictError } from "../kube/errors.ts";

describe("work queue", () => {
  it("backs off exponentially with jitter from 1 s to a 5 min cap", () => {
    expect(backoffDelay(0, { baseMs: 1000, maxMs: 300_000, random: () => 0 })).toBe(500);
    expect(backoffDelay(0, { baseMs: 1000, maxMs: 300_000, random: () => 1 })).toBe(1000);
    expect(backoffDelay(3, { baseMs: 1000, maxMs: 300_000, random: () => 1 })).toBe(8000);
    expect(backoffDelay(30, { baseMs: 1000, maxMs: 300_000, random: () => 1 })).toBe(300_000);
    expect(backoffDelay(30, { baseMs: 1000, maxMs: 300_000, random: () => 0 })).toBe(150_000);
  });

  it("dedupes queued keys and never runs one key on two workers at once", async () => {
    const q = createWorkQueue();
    let running = 0;
    let maxRunning = 0;
    const runs: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    q.start(async (key) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      runs.push(key);
      if (runs.length === 1) await gate;
      running--;
    }, 4);
    q.add("a");
    await new Promise((r) => setTimeout(r, 5));
    q.add("a"); // while in flight: runs once more afterwards
    q.add("a");
    q.add("b");
    q.add("b");
    release();
    await new Promise((r) => setTimeout(r, 20));
    await q.stop();
    expect(runs.sort()).toEqual(["a", "a", "b"]);
    expect(maxRunning).toBeLessThanOrEqual(2);
  });

  it("turns outcomes into requeues in one place", () => {
    const q = createWorkQueue();
    applyOutcome(q, "k", failed(new Error("boom")));
    applyOutcome(q, "k", failed(new Error("boom")));
    expect(q.failures("k")).toBe(2);
    applyOutcome(q, "k", requeueAfter(1000));
    expect(q.failures("k")).toBe(0);
    applyOutcome(q, "t", failed(new TerminalError("InvalidSpec", "bad")));
    expect(q.failures("t")).toBe(0);
    applyOutcome(q, "c", failed(new KubeConflictError("conflict")));
    expect(q.failures("c")).toBe(1);
    expect(q.depth()).toBeGreaterThan(0);
    void q.stop();
  });

  it("releases delayed keys in deadline order; an earlier delay wins, a later one does not postpone", async () => {
    vi.useFakeTimers();
    try {
      const q = createWorkQueue();
      const order: string[] = [];
      q.start(async (key) => {
        order.push(key);
      }, 1);
      const delays = [700, 100, 500, 300, 900, 200, 800, 400, 600];
      for (const [i, ms] of delays.entries()) q.addAfter(`k${i}`, ms);
      q.addAfter("k4", 50); // was 900: now first
      q.addAfter("k1", 1_000); // stays at 100
      expect(q.depth()).toBe(9);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(order).toEqual(["k4", "k1", "k5", "k3", "k7", "k2", "k8", "k0", "k6"]);
      expect(q.depth()).toBe(0);
      await q.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it("runs keys whose delay expired before newly added ones", async () => {
    const q = createWorkQueue();
    const order: string[] = [];
    for (let i = 0; i < 5; i++) q.add(`new-${i}`);
    q.addAfter("polled", 1);
    await new Promise((r) => setTimeout(r, 10));
    q.start(async (key) => {
      order.push(key);
    }, 1);
    await new Promise((r) => setTimeout(r, 20));
    await q.stop();
    expect(order[0]).toBe("polled");
    expect(order).toHaveLength(6);
  });

  describe("fairness between namespaces (a key's namespace is the part before the first '/')", () => {
    /** Runs the queue on one worker until it is empty and returns the keys in the order they ran. */
    async function drain(q: ReturnType<typeof createWorkQueue>): Promise<string[]> {
      const order: string[] = [];
      q.start(async (key) => {
        order.push(key);
      }, 1);
      for (let i = 0; i < 200 && q.depth() > 0; i++) await new Promise((r) => setTimeout(r, 5));
      await q.stop();
      return order;
    }

    it("serves team B's one new key within 2 × namespaces dequeues while team A has 1,000 queued", async () => {
      const q = createWorkQueue();
      for (let i = 0; i < 1000; i++) q.add(`team-a/db-${i}`);
      q.add("team-b/orders");
      const order = await drain(q);
      expect(order).toHaveLength(1001);
      expect(order.indexOf("team-b/orders")).toBeLessThan(2 * 2);
      // Within a namespace, keys keep their order.
      expect(order.filter((k) => k.startsWith("team-a/")).slice(0, 3)).toEqual([
        "team-a/db-0",
        "team-a/db-1",
        "team-a/db-2",
      ]);
    });

    it("serves team B's new key ahead of team A's 1,000 polls whose delay expired", async () => {
      const q = createWorkQueue();
      for (let i = 0; i < 1000; i++) q.addAfter(`team-a/db-${i}`, 1);
      await new Promise((r) => setTimeout(r, 10));
      q.add("team-b/orders");
      const order = await drain(q);
      expect(order).toHaveLength(1001);
      expect(order.indexOf("team-b/orders")).toBeLessThan(2 * 2);
    });

    it("takes namespaces in turn, one key each, with many namespaces", async () => {
      const q = createWorkQueue();
      for (let i = 0; i < 100; i++) q.add(`a/${i}`);
      for (let i = 0; i < 3; i++) q.add(`b/${i}`);
      q.add("c/0");
      const order = await drain(q);
      expect(order.slice(0, 7)).toEqual(["a/0", "b/0", "c/0", "a/1", "b/1", "a/2", "b/2"]);
      expect(order).toHaveLength(104);
    });

    it("serves every key in arrival order with order: fifo (the old order, kept for the benchmark's comparison)", async () => {
      const q = createWorkQueue(undefined, undefined, { order: "fifo" });
      for (let i = 0; i < 10; i++) q.add(`team-a/db-${i}`);
      q.add("team-b/orders");
      const order = await drain(q);
      expect(order.indexOf("team-b/orders")).toBe(10);
    });

    it("keeps dedup, one worker per key and the counts right across namespaces", async () => {
      const q = createWorkQueue();
      q.add("a/x");
      q.add("a/x");
      q.add("b/y");
      q.addAfter("c/z", 60_000);
      expect(q.depth()).toBe(3);
      expect(q.stats()).toMatchObject({ ready: 2, delayed: 1 });
      q.add("a/x", true); // urgent: moves ahead in its namespace, still once
      expect(q.stats()).toMatchObject({ ready: 2, delayed: 1 });
      const order = await drain(q);
      expect(order.sort()).toEqual(["a/x", "b/y"]);
    });
  });

  it("bounds a retry by the service's Retry-After and by the cap for waiting reasons", () => {
    const q = createWorkQueue({ baseMs: 1000, maxMs: 300_000, random: () => 1 });
    expect(q.addRateLimited("a", { minMs: 7_000 })).toBe(7_000);
    for (let i = 0; i < 10; i++) q.addRateLimited("b");
    expect(q.addRateLimited("b", { maxMs: 30_000 })).toBe(30_000);
    void q.stop();
  });

  it("reports as client-go's workqueue does: deduplicated adds not counted, delayed adds as retries, time waiting and working", async () => {
    const events: string[] = [];
    const waits: number[] = [];
    const q = createWorkQueue(undefined, {
      added: () => events.push("add"),
      retried: () => events.push("retry"),
      started: (s) => waits.push(s),
      finished: () => events.push("done"),
    });
    q.add("a");
    q.add("a"); // deduplicated
    q.add("b");
    q.addAfter("c", 60_000); // a retry, not yet an add
    q.addAfter("d", 60_000, { retry: false }); // parked
    expect(events).toEqual(["add", "add", "retry"]);
    expect(q.stats()).toMatchObject({ ready: 2, delayed: 2, active: 0 });
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    await new Promise((r) => setTimeout(r, 20));
    q.start(async (key) => {
      if (key === "a") await gate;
    }, 1);
    await new Promise((r) => setTimeout(r, 30));
    q.add("a"); // while in flight: an add, waiting to run again (client-go counts it in depth)
    const busy = q.stats();
    expect(busy).toMatchObject({ ready: 2, active: 1 });
    expect(busy.longestRunningSeconds).toBeGreaterThanOrEqual(0.02);
    expect(busy.unfinishedSeconds).toBeGreaterThanOrEqual(busy.longestRunningSeconds);
    release();
    await new Promise((r) => setTimeout(r, 20));
    await q.stop();
    expect(events.filter((e) => e === "add")).toHaveLength(3);
    expect(events.filter((e) => e === "done")).toHaveLength(3); // a, b, a again
    expect(waits[0]).toBeGreaterThanOrEqual(0.015); // "a" waited ~20 ms for a worker
    expect(q.stats()).toMatchObject({ ready: 0, active: 0, unfinishedSeconds: 0, longestRunningSeconds: 0 });
  });
});

describe("work queue and the event loop", () => {
  // An operator restarted in front of 10,000 settled Databases reconciles them from its caches: no reconcile waits on
  // the network, so workers that went straight from one key to the next ran the whole queue in one turn of the event
  // loop (microtasks only), and the Lease renewal's timer could not run for seconds: the new leader lost its lease.
  it("gives timers a turn between keys even when no handler waits on I/O", async () => {
    const q = createWorkQueue();
    const n = 10_000;
    let handled = 0;
    let handledWhenTimerRan = -1;
    const timerRan = new Promise<void>((resolve) =>
      setTimeout(() => {
        handledWhenTimerRan = handled;
        resolve();
      }, 0),
    );
    for (let i = 0; i < n; i++) q.add(`ns-${i % 100}/db-${i}`);
    let allDone: () => void = () => {};
    const done = new Promise<void>((resolve) => (allDone = resolve));
    q.start(async () => {
      await Promise.resolve(); // a reconcile answered from caches: a few awaits, no I/O
      if (++handled === n) allDone();
    }, 4);
    await Promise.all([timerRan, done]);
    await q.stop();
    // Counted in keys, not milliseconds: each worker runs one key per turn of the loop, so the timer (due within a
    // millisecond or so) runs after a few keys, not after the whole queue (10,000 before the fix).
    expect(handledWhenTimerRan).toBeGreaterThanOrEqual(0);
    expect(handledWhenTimerRan).toBeLessThan(n / 10);
  });
});
