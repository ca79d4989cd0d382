import { Journal } from "./journal.ts";
import { clone, metaOf, type Obj } from "./types.ts";

type EventType = "ADDED" | "MODIFIED" | "DELETED";
export interface StoreEvent {
  type: EventType;
  rv: number;
  object: Obj;
  previous: Obj | undefined;
}
type StoreListener = (storageKey: string, event: StoreEvent) => void;

interface History {
  start: number;
  events: StoreEvent[];
}

/**
 * All objects, keyed by storage key ("group/plural") then "namespace/name". One global
 * resourceVersion counter; a bounded event history per storage key decides "too old" per
 * resource type (a quiet type keeps its old events, so informers reconnecting from an old RV
 * do not get 410 just because other types were busy).
 */
export class Store {
  private rv: number;
  private readonly startRv: number;
  private readonly data: Map<string, Map<string, Obj>>;
  private readonly history = new Map<string, History>();
  private readonly listeners = new Set<StoreListener>();
  private readonly journal: Journal;
  historyLimit: number;

  constructor(dir: string, historyLimit: number) {
    this.journal = new Journal(dir);
    const loaded = this.journal.load();
    this.rv = loaded.rv;
    this.startRv = loaded.rv;
    this.data = loaded.objects;
    this.historyLimit = historyLimit;
  }

  close(): void {
    this.journal.close();
  }

  currentRv(): number {
    return this.rv;
  }

  subscribe(listener: StoreListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get(sk: string, ns: string, name: string): Obj | undefined {
    const o = this.data.get(sk)?.get(`${ns}/${name}`);
    return o ? clone(o) : undefined;
  }

  /** Objects of one storage key, sorted by namespace then name; all namespaces when ns is undefined. */
  list(sk: string, ns?: string): Obj[] {
    return this.sorted(sk, ns).map(([, o]) => clone(o));
  }

  /** As list, uncopied and with their keys ("namespace/name"): callers must not mutate what they get. */
  sorted(sk: string, ns?: string): Array<[string, Obj]> {
    const bucket = this.data.get(sk);
    if (!bucket) return [];
    const keys = [...bucket.keys()].filter((k) => ns === undefined || k.startsWith(`${ns}/`)).sort();
    return keys.map((k) => [k, bucket.get(k) as Obj]);
  }

  /** Every stored object, uncopied: callers must not mutate what they get. */
  *scan(): Generator<{ sk: string; obj: Obj }> {
    for (const [sk, bucket] of this.data) for (const obj of bucket.values()) yield { sk, obj };
  }

  storageKeys(): string[] {
    return [...this.data.keys()];
  }

  /** Stores obj (already fully prepared), bumping the RV; returns the stored copy. */
  write(sk: string, obj: Obj): Obj {
    const meta = metaOf(obj);
    const key = `${String(meta["namespace"] ?? "")}/${String(meta["name"])}`;
    let bucket = this.data.get(sk);
    if (!bucket) this.data.set(sk, (bucket = new Map()));
    const previous = bucket.get(key);
    const rv = this.rv + 1;
    const stored = clone(obj);
    metaOf(stored)["resourceVersion"] = String(rv);
    this.journal.append({ rv, k: sk, o: stored });
    this.rv = rv;
    bucket.set(key, stored);
    this.compactIfGrown();
    this.emit(sk, { type: previous ? "MODIFIED" : "ADDED", rv, object: stored, previous });
    return clone(stored);
  }

  /** Removes an object; the returned last state carries the deletion RV (what DELETED events show). */
  remove(sk: string, ns: string, name: string): Obj | undefined {
    const key = `${ns}/${name}`;
    const bucket = this.data.get(sk);
    const previous = bucket?.get(key);
    if (!bucket || !previous) return undefined;
    const rv = this.rv + 1;
    this.journal.append({ rv, k: sk, d: key });
    this.rv = rv;
    bucket.delete(key);
    this.compactIfGrown();
    const last = clone(previous);
    metaOf(last)["resourceVersion"] = String(rv);
    this.emit(sk, { type: "DELETED", rv, object: last, previous });
    return clone(last);
  }

  /** A long session (leases renewed every few seconds) would grow the journal without bound. */
  private compactIfGrown(): void {
    if (this.journal.appended < 5000) return;
    let live = 0;
    for (const bucket of this.data.values()) live += bucket.size;
    if (this.journal.appended > 4 * live) this.journal.compact(this.rv, this.data);
  }

  /**
   * Events of one type after `rv`, or "expired" when that type's retained history no longer
   * reaches back to it.
   */
  eventsSince(sk: string, rv: number): StoreEvent[] | "expired" {
    const h = this.history.get(sk);
    const start = h ? h.start : this.startRv;
    if (rv < start) return "expired";
    return h ? h.events.filter((e) => e.rv > rv) : [];
  }

  private emit(sk: string, event: StoreEvent): void {
    let h = this.history.get(sk);
    if (!h) this.history.set(sk, (h = { start: this.startRv, events: [] }));
    h.events.push(event);
    while (h.events.length > this.historyLimit) {
      const evicted = h.events.shift() as StoreEvent;
      h.start = evicted.rv;
    }
    for (const l of this.listeners) l(sk, event);
  }
}
