import { Watch, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { KubeClient } from "./client.ts";
import { KubeError, KubeGoneError } from "./errors.ts";
import { pathOf, stripObject, type KubeObject, type ResourceType } from "./types.ts";

export type InformerEvent = "add" | "update" | "delete";

export interface InformerOptions<T extends KubeObject> {
  kubeConfig: KubeConfig;
  client: KubeClient;
  type: ResourceType;
  /** undefined = all namespaces */
  namespace?: string | undefined;
  /** Cache only what matches (e.g. the operator's own Secrets). */
  labelSelector?: string | undefined;
  onEvent: (event: InformerEvent, obj: T) => void;
  logger: Logger;
  pageSize?: number;
  /** No byte on a watch for this long means a half-open connection: drop it and watch again. */
  watchInactivityMs?: number;
  /** At most one watch request per this interval, whatever fails (client-node#1933). */
  minWatchIntervalMs?: number;
}

export interface Informer<T extends KubeObject> {
  /** Starts the supervised list+watch loop; resolves once the first list has filled the cache. */
  start(): Promise<void>;
  stop(): Promise<void>;
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
  hasSynced(): boolean;
  /** Milliseconds since epoch of the last successful list or watch event; a health check can use it. */
  lastActivityAt(): number;
}

const keyOf = (obj: KubeObject) => `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
const jitter = (ms: number) => ms / 2 + Math.random() * (ms / 2);
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

/**
 * A list+watch cache that never gives up: client-node's ListWatch stops on any error other than 410 and has
 * no pagination, so this loop owns both. Errors back off 1 s → 30 s with jitter; 410 relists once, paginated;
 * a watch silent for `watchInactivityMs` is dropped and re-established from the last resourceVersion.
 */
export function createInformer<T extends KubeObject>(options: InformerOptions<T>): Informer<T> {
  const { client, type, namespace, labelSelector, onEvent, logger } = options;
  const pageSize = options.pageSize ?? 500;
  const inactivityMs = options.watchInactivityMs ?? 90_000;
  const minWatchIntervalMs = options.minWatchIntervalMs ?? 1_000;
  const log = logger.child({ informer: type.plural, ...(namespace === undefined ? {} : { namespace }) });
  let cache = new Map<string, T>();
  let resourceVersion = "";
  let synced = false;
  let lastActivity = 0;
  let lastWatchStart = 0;
  const abort = new AbortController();
  let current: AbortController | undefined;
  let loop: Promise<void> | undefined;
  let resolveSynced: () => void = () => {};
  const syncedPromise = new Promise<void>((resolve) => (resolveSynced = resolve));

  function emit(event: InformerEvent, obj: T) {
    try {
      onEvent(event, obj);
    } catch (err) {
      log.error({ err }, "Informer handler failed");
    }
  }

  async function relist(): Promise<void> {
    const fresh = new Map<string, T>();
    let cont: string | undefined;
    let rv = "";
    do {
      const page = await client.list<T>(type, { namespace, labelSelector, limit: pageSize, continue: cont, signal: abort.signal });
      for (const item of page.items) fresh.set(keyOf(item), item);
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion ?? rv;
    } while (cont !== undefined);
    const old = cache;
    cache = fresh;
    resourceVersion = rv;
    lastActivity = Date.now();
    for (const [key, obj] of old) if (!fresh.has(key)) emit("delete", obj);
    for (const [key, obj] of fresh) {
      const before = old.get(key);
      if (before === undefined) emit("add", obj);
      else if (before.metadata.resourceVersion !== obj.metadata.resourceVersion) emit("update", obj);
    }
    if (!synced) {
      synced = true;
      resolveSynced();
    }
    log.debug({ count: fresh.size }, "Listed objects");
  }

  function applyWatchEvent(kind: string, raw: unknown): void {
    if (typeof raw !== "object" || raw === null) return;
    if (kind === "ERROR") {
      const status = raw as { code?: number };
      if (status.code === 410) resourceVersion = "";
      return;
    }
    const obj = stripObject(raw as T);
    if (obj.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
    lastActivity = Date.now();
    if (kind === "BOOKMARK") return;
    const key = keyOf(obj);
    if (kind === "DELETED") {
      cache.delete(key);
      emit("delete", obj);
    } else if (kind === "ADDED" || kind === "MODIFIED") {
      const existed = cache.has(key);
      cache.set(key, obj);
      emit(existed ? "update" : "add", obj);
    }
  }

  async function watchOnce(): Promise<void> {
    const wait = lastWatchStart + minWatchIntervalMs - Date.now();
    if (wait > 0) await sleep(wait, abort.signal);
    if (abort.signal.aborted) return;
    lastWatchStart = Date.now();
    const watch = new Watch(options.kubeConfig);
    // client-node turns this into an inactivity timeout once the stream is open (its #3022); private in the types.
    (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = inactivityMs;
    const query: Record<string, string> = {
      resourceVersion,
      allowWatchBookmarks: "true",
      // Like client-go: the server closes the watch after 5-10 min, so no connection lives forever.
      timeoutSeconds: String(300 + Math.floor(Math.random() * 300)),
    };
    if (labelSelector !== undefined) query["labelSelector"] = labelSelector;
    await new Promise<void>((resolve, reject) => {
      let finished = false;
      const done = (err: unknown) => {
        if (finished) return;
        finished = true;
        if (err === null || err === undefined) return resolve();
        const e = err as { name?: string; statusCode?: number; code?: number };
        if (e.name === "TimeoutError") {
          log.debug("Watch was silent too long; watching again");
          return resolve();
        }
        if (e.name === "AbortError" || abort.signal.aborted) return resolve();
        if (e.statusCode === 410 || e.code === 410) return reject(new KubeGoneError("watch expired", { status: 410 }));
        reject(new KubeError(`cannot watch ${type.plural}: ${(err as Error).message ?? String(err)}`, { cause: err }));
      };
      watch
        .watch(pathOf(type, namespace), query, applyWatchEvent, done)
        .then((controller) => {
          current = controller;
          if (abort.signal.aborted) controller.abort();
        })
        .catch(done);
    });
  }

  async function run(): Promise<void> {
    let backoffMs = 0;
    while (!abort.signal.aborted) {
      try {
        if (resourceVersion === "") await relist();
        await watchOnce();
        backoffMs = 0;
      } catch (err) {
        if (abort.signal.aborted) return;
        if (err instanceof KubeGoneError) {
          log.debug("Resource version expired; relisting");
          resourceVersion = "";
          continue;
        }
        backoffMs = Math.min(Math.max(1_000, backoffMs * 2), 30_000);
        log.warn({ err, retryInMs: backoffMs }, "Watch failed; restarting");
        // A failed list leaves resourceVersion as it was; a failed watch resumes from it.
        await sleep(jitter(backoffMs), abort.signal);
      }
    }
  }

  return {
    async start() {
      loop ??= run();
      await Promise.race([syncedPromise, loop]);
    },
    async stop() {
      abort.abort();
      current?.abort();
      await loop;
    },
    get(ns, name) {
      return cache.get(`${ns ?? ""}/${name}`);
    },
    list() {
      return [...cache.values()];
    },
    hasSynced: () => synced,
    lastActivityAt: () => lastActivity,
  };
}
