import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { Api } from "./api.ts";
import { Controllers } from "./controllers.ts";
import type { PodLifecycleOptions } from "./pod-lifecycle.ts";
import { Registry } from "./registry.ts";
import { Store, type StoreEvent } from "./store.ts";
import { metaOf, type Obj } from "./types.ts";
import { controllerOf, STORAGE, uidOf } from "./workload-context.ts";
import { WorkloadControllers } from "./workload-controllers.ts";

// devkube's object layer and controllers in process, without HTTP, for the controllers' unit tests: writes as a
// client makes them, and waits that end on a store event (never on a timer).

export interface Kit {
  api: Api;
  store: Store;
  registry: Registry;
  workloads: WorkloadControllers;
  apply(plural: string, body: Obj, ns?: string): Obj;
  patch(plural: string, name: string, merge: Obj, ns?: string, subresource?: "status"): Obj;
  get(plural: string, name: string, ns?: string): Obj | undefined;
  list(plural: string, ns?: string): Obj[];
  /** Pods (not terminating) whose controller is the ReplicaSet/StatefulSet/… with this uid. */
  podsOf(owner: Obj): Obj[];
  /** Resolves once check() holds, re-checked after every store event; rejects after timeoutMs. */
  until<T>(what: string, check: () => T | undefined | false, timeoutMs?: number): Promise<T>;
  /** Calls fn after every store event until stopped (invariants over a whole rollout). */
  everyEvent(fn: (sk: string, ev: StoreEvent) => void): () => void;
  close(): void;
}

const OPTS = { dryRun: false, fieldManager: "test", userAgent: "test", fieldValidation: "Strict" as const };

export function startKit(pods: Partial<PodLifecycleOptions> = {}): Kit {
  const dir = mkdtempSync(path.join(tmpdir(), "devkube-workloads-"));
  const store = new Store(dir, 1000);
  const registry = new Registry();
  const api = new Api(store, registry, () => undefined);
  const logger = pino({ level: "silent" });
  const gc = new Controllers(api, store, registry, logger, undefined);
  const unGc = gc.watchStore();
  const type = (plural: string) => {
    const rt = registry.all().find((t) => t.plural === plural && !t.custom && t.group !== "events.k8s.io");
    if (!rt) throw new Error(`no type ${plural}`);
    return rt;
  };
  api.create(type("namespaces"), undefined, { metadata: { name: "default" } }, OPTS);
  const workloads = new WorkloadControllers(api, store, registry, logger, {
    kubelet: pods.kubelet ?? true,
    readyDelayMs: pods.readyDelayMs ?? 20,
    nodes: pods.nodes ?? ["devkube-node"],
  });
  const unWatch = workloads.start();
  const kit: Kit = {
    api,
    store,
    registry,
    workloads,
    apply: (plural, body, ns = "default") => api.create(type(plural), ns, body, OPTS).body,
    patch(plural, name, merge, ns = "default", subresource) {
      const rt = type(plural);
      const ct = "application/merge-patch+json";
      return api.patch(rt, ns, name, subresource, ct, Buffer.from(JSON.stringify(merge)), { ...OPTS, force: false })
        .body;
    },
    get(plural, name, ns = "default") {
      const rt = type(plural);
      const o = store.get(rt.storageKey, rt.namespaced ? ns : "", name);
      return o ? api.render(rt, o) : undefined;
    },
    list: (plural, ns = "default") => store.list(type(plural).storageKey, ns),
    podsOf: (owner) =>
      store
        .list(STORAGE.pod, String(metaOf(owner)["namespace"]))
        .filter((p) => controllerOf(p)?.["uid"] === uidOf(owner) && !metaOf(p)["deletionTimestamp"]),
    until(what, check, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const test = (): boolean => {
          const v = check();
          if (v === undefined || v === false) return false;
          done();
          resolve(v as never);
          return true;
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${what}`));
        }, timeoutMs);
        const off = store.subscribe(() => queueMicrotask(test));
        const done = () => {
          clearTimeout(timer);
          off();
        };
        test();
      });
    },
    everyEvent: (fn) => store.subscribe((sk, ev) => fn(sk, ev)),
    close() {
      unWatch();
      workloads.stop();
      unGc();
      gc.stop();
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return kit;
}
