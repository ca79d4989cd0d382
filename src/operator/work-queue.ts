// A keyed work queue in the controller-runtime mould: a key is queued at most once (N events → 1 reconcile),
// never processed by two workers at once (a key added while in flight runs again afterwards), delayed adds keep
// the earliest deadline, and failures back off per key. Keys whose delay has expired (polls of objects in
// progress, retries) go ahead of newly added ones, so a burst of applies does not starve the objects already
// being created (the priority queue of controller-runtime, in two lanes).

export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
  random?: () => number;
}

export const defaultBackoff: BackoffOptions = { baseMs: 1_000, maxMs: 5 * 60_000 };

/** Exponential backoff with jitter: the n-th failure waits a random time in [d/2, d], d = min(max, base·2ⁿ). */
export function backoffDelay(failures: number, options: BackoffOptions = defaultBackoff): number {
  const random = options.random ?? Math.random;
  const d = Math.min(options.maxMs, options.baseMs * 2 ** Math.max(0, failures));
  return Math.round(d / 2 + random() * (d / 2));
}

export interface WorkQueue {
  add(key: string, urgent?: boolean): void;
  addAfter(key: string, ms: number): void;
  /** Schedules the key after its next backoff step, bounded by `minMs`/`maxMs`; returns the delay. */
  addRateLimited(key: string, bounds?: { minMs?: number | undefined; maxMs?: number | undefined }): number;
  /** Resets the key's backoff (after a success). */
  forget(key: string): void;
  failures(key: string): number;
  /** Queued plus delayed keys (for the queue-depth metric). */
  depth(): number;
  start(handler: (key: string) => Promise<void>, concurrency: number): void;
  /** Stops taking work and waits for the keys in flight. */
  stop(): Promise<void>;
}

export function createWorkQueue(backoff: BackoffOptions = defaultBackoff): WorkQueue {
  const queue: string[] = [];
  const due: string[] = [];
  const queued = new Set<string>();
  const processing = new Set<string>();
  const dirty = new Set<string>();
  const timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  const failureCounts = new Map<string, number>();
  let handler: ((key: string) => Promise<void>) | undefined;
  let stopped = false;
  const workers: Promise<void>[] = [];
  let wake: (() => void)[] = [];

  function notify() {
    const w = wake;
    wake = [];
    for (const f of w) f();
  }

  function add(key: string, urgent = false) {
    if (stopped) return;
    if (processing.has(key)) {
      dirty.add(key);
      return;
    }
    if (queued.has(key)) {
      if (!urgent) return;
      const i = queue.indexOf(key);
      if (i < 0) return;
      queue.splice(i, 1);
    }
    queued.add(key);
    (urgent ? due : queue).push(key);
    notify();
  }

  function addAfter(key: string, ms: number) {
    if (stopped) return;
    if (ms <= 0) return add(key);
    const at = Date.now() + ms;
    const existing = timers.get(key);
    if (existing !== undefined && existing.at <= at) return;
    if (existing !== undefined) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      timers.delete(key);
      add(key, true);
    }, ms);
    timer.unref();
    timers.set(key, { at, timer });
  }

  async function worker() {
    while (!stopped) {
      const key = due.shift() ?? queue.shift();
      if (key === undefined) {
        await new Promise<void>((resolve) => wake.push(resolve));
        continue;
      }
      queued.delete(key);
      processing.add(key);
      try {
        await handler?.(key);
      } catch {
        // The handler owns error handling; a throw here must not kill the worker.
      } finally {
        processing.delete(key);
        if (dirty.delete(key)) add(key);
      }
    }
  }

  return {
    add,
    addAfter,
    addRateLimited(key, bounds = {}) {
      const n = failureCounts.get(key) ?? 0;
      failureCounts.set(key, n + 1);
      let delay = backoffDelay(n, backoff);
      if (bounds.maxMs !== undefined) delay = Math.min(delay, bounds.maxMs);
      if (bounds.minMs !== undefined) delay = Math.max(delay, bounds.minMs);
      addAfter(key, delay);
      return delay;
    },
    forget(key) {
      failureCounts.delete(key);
    },
    failures: (key) => failureCounts.get(key) ?? 0,
    depth: () => queue.length + due.length + timers.size,
    start(h, concurrency) {
      handler = h;
      for (let i = 0; i < Math.max(1, concurrency); i++) workers.push(worker());
    },
    async stop() {
      stopped = true;
      for (const { timer } of timers.values()) clearTimeout(timer);
      timers.clear();
      notify();
      await Promise.all(workers);
    },
  };
}
