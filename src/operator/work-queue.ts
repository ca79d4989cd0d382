// A keyed work queue in the controller-runtime mould: a key is queued at most once (N events → 1 reconcile),
// never processed by two workers at once (a key added while in flight runs again afterwards), delayed adds keep
// the earliest deadline, and failures back off per key.
//
// Fair between namespaces (teams): each namespace (a key's part before the first "/") has its own lanes, and the
// namespaces with ready keys are served in turn, one key each (round-robin). A team applying 1,000 Databases at once
// then holds back another team's one Database by at most one key per busy namespace, not by its whole burst.
// Within a namespace, keys whose delay has expired (polls of objects in progress, retries) go ahead of newly added
// ones, so a burst of applies does not starve the objects already being created (controller-runtime's priority
// queue, in two lanes).
//
// Each worker gives the event loop a turn (setImmediate) between two keys: a reconcile answered from caches waits on
// no I/O, and workers that went straight to the next key ran a whole queue (10,000 settled Databases after a restart)
// in one turn, starving every timer and socket, the Lease renewal's too.

import { setImmediate as nextTurn } from "node:timers/promises";

interface BackoffOptions {
  baseMs: number;
  maxMs: number;
  random?: () => number;
}

const defaultBackoff: BackoffOptions = { baseMs: 1_000, maxMs: 5 * 60_000 };

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

interface WorkQueueOptions {
  /**
   * "namespaces" (default): namespaces in turn. "fifo": every key in one line, in order of arrival (expired delays
   * first), as before namespaces were served in turn; kept so bench/fairness.ts can measure both in one run.
   */
  order?: "namespaces" | "fifo";
}

/** A namespace's ready keys: expired delays ("due") go ahead of new adds. */
interface Lanes {
  due: string[];
  added: string[];
}

/** The part of a "namespace/name" key before the first "/" ("" for a key without one). */
function namespaceOfKey(key: string): string {
  const i = key.indexOf("/");
  return i < 0 ? "" : key.slice(0, i);
}

// eslint-disable-next-line max-lines-per-function -- a factory: its closure is the queue's state (pending, delayed, in flight, backoff); each method is short
export function createWorkQueue(
  backoff: BackoffOptions = defaultBackoff,
  observer?: QueueObserver,
  options: WorkQueueOptions = {},
): WorkQueue {
  const laneKeyOf = options.order === "fifo" ? () => "" : namespaceOfKey;
  // Only namespaces with ready keys have lanes, and they are in `turns`, in the order they are served next.
  const lanes = new Map<string, Lanes>();
  const turns: string[] = [];
  let readyCount = 0;
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
      // Queued already: an urgent add moves it to its namespace's due lane, once.
      if (!urgent) return;
      const own = lanes.get(laneKeyOf(key));
      const i = own?.added.indexOf(key) ?? -1;
      if (own === undefined || i < 0) return;
      own.added.splice(i, 1);
      own.due.push(key);
      return;
    }
    noteAdded(key);
    push(key, urgent ? "due" : "added");
  }

  /** Queues a key that is neither queued nor in a worker. */
  function push(key: string, lane: keyof Lanes) {
    const name = laneKeyOf(key);
    let own = lanes.get(name);
    if (own === undefined) {
      own = { due: [], added: [] };
      lanes.set(name, own);
      turns.push(name);
    }
    own[lane].push(key);
    queued.add(key);
    readyCount++;
    notify();
  }

  /** The next key: the next namespace in turn gives one, and goes to the back of the line if it has more. */
  function next(): string | undefined {
    const name = turns.shift();
    if (name === undefined) return undefined;
    const own = lanes.get(name) as Lanes;
    const key = (own.due.shift() ?? own.added.shift()) as string;
    if (own.due.length + own.added.length > 0) turns.push(name);
    else lanes.delete(name);
    queued.delete(key);
    readyCount--;
    return key;
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
      const key = next();
      if (key === undefined) {
        await new Promise<void>((resolve) => wake.push(resolve));
        continue;
      }
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
          // Counted as an add when it came in (add() would count it again); it now waits in its namespace's lane.
          push(key, "added");
        }
      }
      await nextTurn();
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
    depth: () => readyCount + deadlines.size,
    stats(now = performance.now()) {
      let unfinished = 0;
      let longest = 0;
      for (const t of startedAt.values()) {
        unfinished += now - t;
        longest = Math.max(longest, now - t);
      }
      return {
        ready: readyCount + dirty.size,
        delayed: deadlines.size,
        active: processing.size,
        unfinishedSeconds: unfinished / 1000,
        longestRunningSeconds: longest / 1000,
      };
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
