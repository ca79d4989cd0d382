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

/**
 * What the queue reports, in client-go's workqueue terms (so the operator can publish workqueue_* metrics with their
 * semantics): an add that queued a key (a deduplicated one is not counted), a delayed add (a "retry"), and each key's
 * wait from add to a worker and its time in the worker.
 */
export interface QueueObserver {
  added(): void;
  retried(): void;
  started(waitedSeconds: number): void;
  finished(workedSeconds: number): void;
}

/** The queue at one instant, read at scrape time. */
export interface QueueStats {
  /** Keys ready to run: queued, plus keys added again while in flight (client-go's depth; delayed keys are not). */
  ready: number;
  /** Keys whose delay has not expired yet. */
  delayed: number;
  /** Keys in a worker now. */
  active: number;
  /** Seconds the keys now in workers have run, summed, and the longest of them. */
  unfinishedSeconds: number;
  longestRunningSeconds: number;
}

export interface WorkQueue {
  add(key: string, urgent?: boolean): void;
  /** Adds the key after `ms`; `retry: false` for a key only parked (not counted in workqueue_retries_total). */
  addAfter(key: string, ms: number, options?: { retry?: boolean }): void;
  /** Schedules the key after its next backoff step, bounded by `minMs`/`maxMs`; returns the delay. */
  addRateLimited(key: string, bounds?: { minMs?: number | undefined; maxMs?: number | undefined }): number;
  /** Resets the key's backoff (after a success). */
  forget(key: string): void;
  failures(key: string): number;
  /** Queued plus delayed keys (for the queue-depth metric). */
  depth(): number;
  stats(now?: number): QueueStats;
  start(handler: (key: string) => Promise<void>, concurrency: number): void;
  /** Stops taking work and waits for the keys in flight. */
  stop(): Promise<void>;
}

export function createWorkQueue(backoff: BackoffOptions = defaultBackoff, observer?: QueueObserver): WorkQueue {
  const queue: string[] = [];
  const due: string[] = [];
  const queued = new Set<string>();
  const processing = new Set<string>();
  const dirty = new Set<string>();
  // Delayed keys: one timer for the earliest deadline and a min-heap of (deadline, key), not a timer per key (at
  // 10,000 objects a Timeout with its closure per key was 3 MB). A heap entry whose deadline no longer matches
  // `deadlines` was superseded by an earlier one and is skipped.
  const deadlines = new Map<string, number>();
  const heap: Array<[number, string]> = [];
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Infinity;
  const failureCounts = new Map<string, number>();
  let handler: ((key: string) => Promise<void>) | undefined;
  let stopped = false;
  const workers: Promise<void>[] = [];
  let wake: (() => void)[] = [];
  // For the observer: when each waiting key was added, when each key in a worker started (performance.now(), ms).
  const addedAt = new Map<string, number>();
  const startedAt = new Map<string, number>();

  function notify() {
    const w = wake;
    wake = [];
    for (const f of w) f();
  }

  function add(key: string, urgent = false) {
    if (stopped) return;
    if (processing.has(key)) {
      if (!dirty.has(key)) noteAdded(key);
      dirty.add(key);
      return;
    }
    if (queued.has(key)) {
      if (!urgent) return;
      const i = queue.indexOf(key);
      if (i < 0) return;
      queue.splice(i, 1);
    } else {
      noteAdded(key);
    }
    queued.add(key);
    (urgent ? due : queue).push(key);
    notify();
  }

  function noteAdded(key: string) {
    if (observer === undefined) return;
    observer.added();
    if (!addedAt.has(key)) addedAt.set(key, performance.now());
  }

  function addAfter(key: string, ms: number, options: { retry?: boolean } = {}) {
    if (stopped) return;
    if (options.retry !== false) observer?.retried();
    if (ms <= 0) return add(key);
    const at = Date.now() + ms;
    const existing = deadlines.get(key);
    if (existing !== undefined && existing <= at) return;
    deadlines.set(key, at);
    heapPush(heap, [at, key]);
    arm();
  }

  /** Keeps the one timer on the earliest deadline. */
  function arm() {
    const next = heap[0]?.[0] ?? Infinity;
    if (next >= timerAt) return;
    if (timer !== undefined) clearTimeout(timer);
    timerAt = next;
    timer = setTimeout(fire, Math.max(0, next - Date.now()));
    timer.unref();
  }

  function fire() {
    timer = undefined;
    timerAt = Infinity;
    const now = Date.now();
    while (heap.length > 0 && (heap[0] as [number, string])[0] <= now) {
      const [at, key] = heapPop(heap) as [number, string];
      if (deadlines.get(key) !== at) continue;
      deadlines.delete(key);
      add(key, true);
    }
    arm();
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
      const start = performance.now();
      if (observer !== undefined) {
        observer.started((start - (addedAt.get(key) ?? start)) / 1000);
        addedAt.delete(key);
        startedAt.set(key, start);
      }
      try {
        await handler?.(key);
      } catch {
        // The handler owns error handling; a throw here must not kill the worker.
      } finally {
        processing.delete(key);
        if (observer !== undefined) {
          startedAt.delete(key);
          observer.finished((performance.now() - start) / 1000);
        }
        if (dirty.delete(key) && !stopped) {
          // Counted as an add when it came in (add() would count it again); it now waits in the queue proper.
          queued.add(key);
          queue.push(key);
          notify();
        }
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
    depth: () => queue.length + due.length + deadlines.size,
    stats(now = performance.now()) {
      let unfinished = 0;
      let longest = 0;
      for (const t of startedAt.values()) {
        unfinished += now - t;
        longest = Math.max(longest, now - t);
      }
      return { ready: queue.length + due.length + dirty.size, delayed: deadlines.size, active: processing.size, unfinishedSeconds: unfinished / 1000, longestRunningSeconds: longest / 1000 };
    },
    start(h, concurrency) {
      handler = h;
      for (let i = 0; i < Math.max(1, concurrency); i++) workers.push(worker());
    },
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      deadlines.clear();
      heap.length = 0;
      notify();
      await Promise.all(workers);
    },
  };
}

/** Binary min-heap on the first element (a deadline). */
function heapPush(heap: Array<[number, string]>, item: [number, string]): void {
  heap.push(item);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if ((heap[parent] as [number, string])[0] <= item[0]) break;
    heap[i] = heap[parent] as [number, string];
    i = parent;
  }
  heap[i] = item;
}

function heapPop(heap: Array<[number, string]>): [number, string] | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (top === undefined || last === undefined || heap.length === 0) return top;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= heap.length) break;
    const r = l + 1;
    const child = r < heap.length && (heap[r] as [number, string])[0] < (heap[l] as [number, string])[0] ? r : l;
    if ((heap[child] as [number, string])[0] >= last[0]) break;
    heap[i] = heap[child] as [number, string];
    i = child;
  }
  heap[i] = last;
  return top;
}
