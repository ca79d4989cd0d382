import type { IncomingMessage, ServerResponse } from "node:http";
import type { Api } from "./api.ts";
import { failureStatus } from "./errors.ts";
import { apiVersionOf, type ResourceType } from "./resource-type.ts";
import type { Selector } from "./selectors.ts";
import type { Store, StoreEvent } from "./store.ts";
import { buildTable, type IncludeObject } from "./table.ts";
import { metaOf, type Obj } from "./types.ts";

// Watch streams: one JSON event per line, flushed per event, with selector transitions
// (an object leaving the selector is reported as DELETED), per-type "too old" judgement,
// bookmarks and timeouts.

interface WatchRequest {
  rt: ResourceType;
  namespace: string | undefined;
  label: Selector | undefined;
  field: Selector | undefined;
  resourceVersion: string | undefined;
  timeoutSeconds: number | undefined;
  bookmarks: boolean;
  table: IncludeObject | undefined;
  /** WatchList: initial ADDED events, then a BOOKMARK annotated k8s.io/initial-events-end. */
  sendInitialEvents: boolean;
}

const TOO_LARGE_WAIT_MS = 3000;

interface WatchSettings {
  bookmarkIntervalMs: number;
  maxWatchSeconds: number;
}

export class WatchHub {
  private readonly open = new Set<{ storageKey: string; close: () => void }>();
  private readonly store: Store;
  private readonly api: Api;
  private readonly settings: WatchSettings;

  constructor(store: Store, api: Api, settings: WatchSettings) {
    this.store = store;
    this.api = api;
    this.settings = settings;
  }

  /** Ends every open watch (server stop, or a test simulating dropped connections). */
  closeAll(storageKey?: string): void {
    for (const w of [...this.open]) if (storageKey === undefined || w.storageKey === storageKey) w.close();
  }

  count(): number {
    return this.open.size;
  }

  serve(req: IncomingMessage, res: ServerResponse, w: WatchRequest): void {
    const { rt } = w;
    const contentType = w.table ? "application/json;as=Table;v=v1;g=meta.k8s.io" : "application/json";
    res.writeHead(200, {
      "Content-Type": contentType,
      "Cache-Control": "no-cache, private",
      "Transfer-Encoding": "chunked",
    });
    res.flushHeaders();
    let headersSent = false;
    let closed = false;
    const timers: NodeJS.Timeout[] = [];
    const matches = (o: Obj): boolean => {
      if (rt.namespaced && w.namespace !== undefined && metaOf(o)["namespace"] !== w.namespace) return false;
      return (!w.label || w.label(o)) && (!w.field || w.field(o));
    };
    const send = (type: string, object: Obj): void => {
      if (closed) return;
      let payload = object;
      if (w.table && type !== "ERROR" && type !== "BOOKMARK") {
        payload = buildTable(rt, [object], w.table, String(metaOf(object)["resourceVersion"] ?? ""), !headersSent);
        headersSent = true;
      }
      res.write(`${JSON.stringify({ type, object: payload })}\n`);
    };
    let skipUpTo = 0;
    const handle = (ev: StoreEvent): void => {
      if (ev.rv <= skipUpTo) return;
      const now = this.api.render(rt, ev.object);
      const was = ev.previous ? this.api.render(rt, ev.previous) : undefined;
      const nowMatch = ev.type !== "DELETED" && matches(now);
      const wasMatch = was !== undefined && matches(was);
      if (ev.type === "DELETED") {
        if (wasMatch || matches(now)) send("DELETED", now);
      } else if (nowMatch && wasMatch) send("MODIFIED", now);
      else if (nowMatch) send("ADDED", now);
      else if (wasMatch) send("DELETED", now);
    };
    const entry = { storageKey: rt.storageKey, close: () => finish() };
    const finish = (): void => {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      unsubscribe();
      this.open.delete(entry);
      res.end();
    };
    const unsubscribe = this.store.subscribe((sk, ev) => {
      if (sk === rt.storageKey) handle(ev);
    });
    this.open.add(entry);
    req.on("close", finish);
    res.on("error", finish);

    const rv = w.resourceVersion;
    if (w.sendInitialEvents) {
      for (const o of this.store.list(rt.storageKey, rt.namespaced ? w.namespace : undefined)) {
        const r = this.api.render(rt, o);
        if (matches(r)) send("ADDED", r);
      }
      send("BOOKMARK", {
        kind: rt.kind,
        apiVersion: apiVersionOf(rt),
        metadata: {
          resourceVersion: String(this.store.currentRv()),
          annotations: { "k8s.io/initial-events-end": "true" },
        },
      });
    } else if (rv === undefined || rv === "" || rv === "0") {
      for (const o of this.store.list(rt.storageKey, rt.namespaced ? w.namespace : undefined)) {
        const r = this.api.render(rt, o);
        if (matches(r)) send("ADDED", r);
      }
    } else {
      const n = Number(rv);
      if (!Number.isInteger(n) || n < 0) {
        send("ERROR", failureStatus(400, "BadRequest", `invalid resource version: ${rv}`));
        finish();
        return;
      }
      if (n > this.store.currentRv()) {
        // like the watch cache: wait up to 3 s for the store to reach that RV, then give up
        skipUpTo = n;
        timers.push(
          setTimeout(() => {
            if (this.store.currentRv() >= n) return;
            send(
              "ERROR",
              failureStatus(
                504,
                "Timeout",
                `Timeout: Too large resource version: ${n}, current: ${this.store.currentRv()}`,
                {
                  causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
                  retryAfterSeconds: 1,
                },
              ),
            );
            finish();
          }, TOO_LARGE_WAIT_MS),
        );
      }
      const events = n > this.store.currentRv() ? [] : this.store.eventsSince(rt.storageKey, n);
      if (events === "expired") {
        send("ERROR", failureStatus(410, "Expired", `too old resource version: ${n} (${this.store.currentRv()})`));
        finish();
        return;
      }
      for (const ev of events) handle(ev);
    }
    const bookmark = (): void =>
      send("BOOKMARK", {
        kind: rt.kind,
        apiVersion: apiVersionOf(rt),
        metadata: { resourceVersion: String(this.store.currentRv()) },
      });
    if (w.bookmarks) {
      const tick = (): void => {
        bookmark();
        timers.push(setTimeout(tick, this.settings.bookmarkIntervalMs));
      };
      timers.push(setTimeout(tick, this.settings.bookmarkIntervalMs));
    }
    const seconds =
      w.timeoutSeconds !== undefined && w.timeoutSeconds > 0
        ? Math.min(w.timeoutSeconds, this.settings.maxWatchSeconds)
        : this.settings.maxWatchSeconds * (1 + Math.random());
    timers.push(
      setTimeout(() => {
        if (w.bookmarks) bookmark();
        finish();
      }, seconds * 1000),
    );
  }
}
