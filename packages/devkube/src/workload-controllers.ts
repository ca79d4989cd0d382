import type { Logger } from "pino";
import type { Api } from "./api.ts";
import { syncDaemonSet } from "./daemonset-controller.ts";
import { syncDeployment } from "./deployment-controller.ts";
import { ApiError } from "./errors.ts";
import { syncJob } from "./job-controller.ts";
import { PodLifecycle, type PodLifecycleOptions } from "./pod-lifecycle.ts";
import type { Registry } from "./registry.ts";
import { syncReplicaSet } from "./replicaset-controller.ts";
import { syncStatefulSet } from "./statefulset-controller.ts";
import type { Store, StoreEvent } from "./store.ts";
import { metaOf, type Obj } from "./types.ts";
import {
  controllerOf,
  NODES,
  selects,
  specOf,
  STORAGE,
  uidOf,
  WorkloadContext,
  type Kind,
} from "./workload-context.ts";

// kube-controller-manager's workload controllers, the scheduler and a kubelet, driven by the store's events: a
// write enqueues the objects it concerns (itself, its controller); the queue is drained on the next turn of the event
// loop, one sync per key however many events came. Timers exist only where no event will come: a pod's start
// delay, minReadySeconds, progressDeadlineSeconds. With no workload objects nothing runs.

const KIND_BY_STORAGE = new Map<string, Kind>(Object.entries(STORAGE).map(([k, sk]) => [sk, k as Kind]));
const KIND_BY_OWNER: Record<string, Kind> = {
  Deployment: "deployment",
  ReplicaSet: "replicaset",
  StatefulSet: "statefulset",
  DaemonSet: "daemonset",
  Job: "job",
};

export class WorkloadControllers {
  private readonly ctx: WorkloadContext;
  private readonly pods: PodLifecycle;
  private readonly logger: Logger;
  private readonly queue = new Set<string>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private draining: NodeJS.Immediate | undefined;
  private stopped = false;
  /** Syncs run so far (tests and the idle-cost measurement read it). */
  syncs = 0;

  constructor(api: Api, store: Store, registry: Registry, logger: Logger, pods: PodLifecycleOptions) {
    this.logger = logger;
    this.ctx = new WorkloadContext(api, store, registry, (kind, ns, name, ms) =>
      this.after(`${kind}|${ns}|${name}`, ms),
    );
    this.pods = new PodLifecycle(this.ctx, pods);
  }

  /** Creates the Nodes, enqueues what is stored (after a restart) and follows the store's events. */
  start(): () => void {
    this.pods.ensureNodes();
    for (const [sk, kind] of KIND_BY_STORAGE) for (const [, o] of this.ctx.store.sorted(sk)) this.enqueue(kind, o);
    return this.ctx.store.subscribe((sk, ev) => this.onEvent(sk, ev));
  }

  stop(): void {
    this.stopped = true;
    if (this.draining) clearImmediate(this.draining);
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.queue.clear();
  }

  private onEvent(sk: string, ev: StoreEvent): void {
    const kind = KIND_BY_STORAGE.get(sk);
    if (kind) {
      if (ev.type === "DELETED" && kind === "pod") this.pods.forget(uidOf(ev.object));
      if (ev.type !== "DELETED") this.enqueue(kind, ev.object);
      // the controller of what changed (a pod's ReplicaSet, a ReplicaSet's Deployment), before and after
      const ns = String(metaOf(ev.object)["namespace"] ?? "");
      for (const o of [ev.object, ev.previous]) {
        const ref = o && controllerOf(o);
        const owner = ref && KIND_BY_OWNER[String(ref["kind"])];
        if (owner) this.push(`${owner}|${ns}|${String(ref["name"])}`);
      }
      // an orphan: the controllers whose selector matches it may adopt it
      if (ev.type !== "DELETED" && !controllerOf(ev.object) && (kind === "pod" || kind === "replicaset"))
        this.enqueueSelecting(
          kind === "pod" ? ["replicaset", "statefulset", "daemonset"] : ["deployment"],
          ns,
          ev.object,
        );
    } else if (sk === NODES) {
      for (const [, ds] of this.ctx.store.sorted(STORAGE.daemonset)) this.enqueue("daemonset", ds);
    }
  }

  private enqueueSelecting(kinds: Kind[], ns: string, o: Obj): void {
    for (const kind of kinds)
      for (const [, owner] of this.ctx.store.sorted(STORAGE[kind], ns))
        if (selects(specOf(owner)["selector"], metaOf(o)["labels"])) this.enqueue(kind, owner);
  }

  private enqueue(kind: Kind, o: Obj): void {
    const meta = metaOf(o);
    this.push(`${kind}|${String(meta["namespace"] ?? "")}|${String(meta["name"])}`);
  }

  private push(key: string): void {
    if (this.stopped) return;
    this.queue.add(key);
    this.draining ??= setImmediate(() => this.drain());
  }

  private after(key: string, ms: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(key);
    if (existing) clearTimeout(existing);
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.push(key);
      }, ms),
    );
  }

  private drain(): void {
    this.draining = undefined;
    const keys = [...this.queue];
    this.queue.clear();
    for (const key of keys) {
      if (this.stopped) return;
      const [kind, ns, name] = key.split("|") as [Kind, string, string];
      this.syncs++;
      try {
        this.sync(kind, ns, name);
      } catch (err) {
        // a write raced another (409): sync again; a namespace going away (403, 404) ends the matter
        if (err instanceof ApiError && err.code === 409) this.push(key);
        else if (err instanceof ApiError && (err.code === 403 || err.code === 404)) continue;
        else this.logger.error({ err, key }, "devkube workload controller failed");
      }
    }
  }

  private sync(kind: Kind, ns: string, name: string): void {
    switch (kind) {
      case "deployment":
        return syncDeployment(this.ctx, ns, name);
      case "replicaset":
        return syncReplicaSet(this.ctx, ns, name);
      case "statefulset":
        return syncStatefulSet(this.ctx, ns, name);
      case "daemonset":
        return syncDaemonSet(this.ctx, ns, name);
      case "job":
        return syncJob(this.ctx, ns, name);
      case "pod":
        return this.pods.sync(ns, name);
    }
  }
}
