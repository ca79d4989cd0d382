import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import pino from "pino";
import {
  LeaseConflictError,
  createLeaderElector,
  formatMicroTime,
  type LeaseClient,
  type LeaseRecord,
} from "./leader-election.ts";

// An in-memory Lease with the apiserver's optimistic concurrency. The real Lease (devkube) is covered by
// leader-election.kube.test.ts; this one lets fake timers walk through expiry and deadlines deterministically.
function memoryLease() {
  let stored: { record: LeaseRecord; resourceVersion: string } | undefined;
  let rv = 0;
  const state = { failing: false };
  const check = () => {
    if (state.failing) throw new Error("cannot reach the apiserver");
  };
  const client = (): LeaseClient => ({
    description: "test/lease",
    async get() {
      check();
      return stored && { record: { ...stored.record }, resourceVersion: stored.resourceVersion };
    },
    async create(record) {
      check();
      if (stored) throw new LeaseConflictError("exists");
      stored = { record: { ...record }, resourceVersion: String(++rv) };
    },
    async update(record, resourceVersion) {
      check();
      if (!stored || stored.resourceVersion !== resourceVersion) throw new LeaseConflictError("conflict");
      stored = { record: { ...record }, resourceVersion: String(++rv) };
    },
  });
  return { client, state, holder: () => stored?.record.holderIdentity, record: () => stored?.record };
}

const logger = pino({ level: "silent" });

describe("leader election", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("formats MicroTime with exactly six fractional digits", () => {
    expect(formatMicroTime(new Date("2026-11-21T08:13:31.123Z"))).toBe("2026-11-21T08:13:31.123000Z");
  });

  it("one of two candidates leads; the other takes over at once when the leader releases", async () => {
    const lease = memoryLease();
    const a = createLeaderElector({ lease: lease.client(), identity: "a", logger });
    const b = createLeaderElector({ lease: lease.client(), identity: "b", logger });
    a.start();
    await vi.advanceTimersByTimeAsync(10);
    b.start();
    await vi.advanceTimersByTimeAsync(30_000);
    expect([a.isLeader(), b.isLeader()]).toEqual([true, false]);
    expect(lease.holder()).toBe("a");
    expect(b.observedLeader()).toBe("a");

    await a.stop();
    expect(a.isLeader()).toBe(false);
    expect(lease.holder()).toBe("");
    await vi.advanceTimersByTimeAsync(2_500);
    expect(b.isLeader()).toBe(true);
    expect(lease.record()?.leaseTransitions).toBe(1);
    await b.stop();
  });

  it("a leader that cannot renew stops writing at the renew deadline, before the lease expires", async () => {
    const lease = memoryLease();
    const stopped = vi.fn();
    const a = createLeaderElector({ lease: lease.client(), identity: "a", logger, onStoppedLeading: stopped });
    a.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(a.isLeader()).toBe(true);
    lease.state.failing = true;
    await vi.advanceTimersByTimeAsync(9_000);
    expect(a.isLeader()).toBe(true);
    await vi.advanceTimersByTimeAsync(1_500);
    expect(a.isLeader()).toBe(false);
    expect(stopped).toHaveBeenCalledTimes(1);
    await a.stop();
  });

  it("isLeader turns false at the deadline even when no timer has run (starved event loop)", async () => {
    const lease = memoryLease();
    let clock = 1_000_000;
    const a = createLeaderElector({ lease: lease.client(), identity: "a", logger, now: () => clock });
    a.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(a.isLeader()).toBe(true);
    clock += 10_000;
    expect(a.isLeader()).toBe(false);
    await a.stop();
  });

  it("a candidate waits out a crashed leader's lease, then acquires", async () => {
    const lease = memoryLease();
    const alive = { a: true };
    const aClient = lease.client();
    // A crashed process makes no more calls; modelled by a client whose every call fails.
    const crashable: LeaseClient = {
      description: aClient.description,
      get: () => (alive.a ? aClient.get() : Promise.reject(new Error("dead"))),
      create: (r) => (alive.a ? aClient.create(r) : Promise.reject(new Error("dead"))),
      update: (r, v) => (alive.a ? aClient.update(r, v) : Promise.reject(new Error("dead"))),
    };
    const a = createLeaderElector({ lease: crashable, identity: "a", logger });
    const b = createLeaderElector({ lease: lease.client(), identity: "b", logger });
    a.start();
    await vi.advanceTimersByTimeAsync(10);
    b.start();
    await vi.advanceTimersByTimeAsync(4_000);
    alive.a = false;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(a.isLeader()).toBe(false);
    expect(b.isLeader()).toBe(false); // the lease has not expired yet by b's own clock
    await vi.advanceTimersByTimeAsync(10_000);
    expect(b.isLeader()).toBe(true);
    expect(lease.holder()).toBe("b");
    await a.stop();
    await b.stop();
  });
});
