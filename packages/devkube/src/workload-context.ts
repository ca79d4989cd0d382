import { randomBytes } from "node:crypto";
import { labelsMatch } from "./admission.ts";
import type { Api } from "./api.ts";
import { ApiError } from "./errors.ts";
import type { Registry } from "./registry.ts";
import type { ResourceType } from "./resource-type.ts";
import type { Store } from "./store.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

// What the workload controllers share: reading the store, writing through the API as kube-controller-manager does
// (its field managers, generation and managedFields as for any client), and the small helpers of upstream's
// controller utilities (controller references, pod readiness and availability).

export type Kind = "deployment" | "replicaset" | "statefulset" | "daemonset" | "job" | "pod";

export const STORAGE: Record<Kind, string> = {
  deployment: "apps/deployments",
  replicaset: "apps/replicasets",
  statefulset: "apps/statefulsets",
  daemonset: "apps/daemonsets",
  job: "batch/jobs",
  pod: "/pods",
};
export const NODES = "/nodes";
export const CONTROLLER_REVISIONS = "apps/controllerrevisions";

export const specOf = (o: Obj): Obj => (isObj(o["spec"]) ? o["spec"] : {});
export const statusOf = (o: Obj): Obj => (isObj(o["status"]) ? o["status"] : {});
export const nameOf = (o: Obj): string => String(metaOf(o)["name"] ?? "");
export const uidOf = (o: Obj): string => String(metaOf(o)["uid"] ?? "");
export const num = (v: unknown, d = 0): number => (typeof v === "number" ? v : d);
export const objList = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);

export class WorkloadContext {
  readonly api: Api;
  readonly store: Store;
  private readonly registry: Registry;
  /** Asks for `kind ns/name` to be synced again after ms (availability after minReadySeconds, deadlines, delays). */
  readonly requeue: (kind: Kind, ns: string, name: string, afterMs: number) => void;

  constructor(
    api: Api,
    store: Store,
    registry: Registry,
    requeue: (kind: Kind, ns: string, name: string, afterMs: number) => void,
  ) {
    this.api = api;
    this.store = store;
    this.registry = registry;
    this.requeue = requeue;
  }

  type(sk: string): ResourceType {
    const rt = this.registry.forStorageKey(sk);
    if (!rt) throw new Error(`devkube registry lacks ${sk}`);
    return rt;
  }

  /** The object as served (apiVersion, kind), ready to be changed and written back with its resourceVersion. */
  get(sk: string, ns: string, name: string): Obj | undefined {
    const o = this.store.get(sk, ns, name);
    return o ? this.api.render(this.type(sk), o) : undefined;
  }

  /** Objects of sk in ns controlled by the object with this uid (uncopied: do not mutate). */
  owned(sk: string, ns: string, uid: string): Obj[] {
    return this.store
      .sorted(sk, ns)
      .map(([, o]) => o)
      .filter((o) => controllerOf(o)?.["uid"] === uid);
  }

  /**
   * Upstream's ControllerRefManager: objects of sk in the owner's namespace that no controller owns and that its
   * selector matches are adopted (a controller reference added), and those it owns that no longer match are released
   * (its reference removed: their replacement follows). `member` narrows adoption (a StatefulSet's pod names).
   */
  claim(sk: string, owner: Obj, kind: string, member: (o: Obj) => boolean = () => true): void {
    if (isTerminating(owner)) return;
    const ns = String(metaOf(owner)["namespace"] ?? "");
    const uid = uidOf(owner);
    const selector = specOf(owner)["selector"];
    for (const [, o] of this.store.sorted(sk, ns)) {
      if (isTerminating(o)) continue;
      const ref = controllerOf(o);
      const matches = selects(selector, metaOf(o)["labels"]) && member(o);
      if (ref ? ref["uid"] !== uid || matches : !matches) continue;
      const cur = this.get(sk, ns, nameOf(o));
      if (!cur) continue;
      const others = objList(metaOf(cur)["ownerReferences"]).filter((r) => r["uid"] !== uid);
      metaOf(cur)["ownerReferences"] = ref ? others : [...others, controllerRef(owner, "apps/v1", kind)];
      this.update(sk, cur, "kube-controller-manager");
    }
  }

  create(sk: string, ns: string, body: Obj, manager: string): Obj {
    return this.api.create(this.type(sk), ns, body, writeOptions(manager)).body;
  }

  /** A PUT with the object's resourceVersion (a concurrent writer makes it fail with 409; the sync is retried). */
  update(sk: string, obj: Obj, manager: string, subresource?: "status"): Obj {
    const meta = metaOf(obj);
    return this.api.update(
      this.type(sk),
      String(meta["namespace"] ?? ""),
      nameOf(obj),
      subresource,
      obj,
      writeOptions(manager),
    ).body;
  }

  /**
   * A core/v1 Event about obj, as the controllers record them (what `kubectl describe` lists): reason, message, the
   * reporting component.
   */
  event(obj: Obj, reason: string, message: string, component: string, type: "Normal" | "Warning" = "Normal"): void {
    const meta = metaOf(obj);
    const ns = String(meta["namespace"] ?? "default");
    const time = nowTime();
    this.create(
      "/events",
      ns,
      {
        metadata: { name: `${nameOf(obj)}.${randomBytes(8).toString("hex")}`, namespace: ns },
        involvedObject: {
          apiVersion: obj["apiVersion"],
          kind: obj["kind"],
          name: meta["name"],
          namespace: ns,
          uid: meta["uid"],
          resourceVersion: meta["resourceVersion"],
        },
        reason,
        message,
        type,
        source: { component },
        reportingComponent: component,
        reportingInstance: component,
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      },
      component,
    );
  }

  delete(sk: string, ns: string, name: string): void {
    try {
      this.api.delete(this.type(sk), ns, name, { propagationPolicy: "Background", dryRun: false });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }
}

function writeOptions(manager: string) {
  return { dryRun: false, fieldManager: manager, userAgent: manager, fieldValidation: "Ignore" as const };
}

export function controllerOf(o: Obj): Obj | undefined {
  return objList(metaOf(o)["ownerReferences"]).find((r) => r["controller"] === true);
}

export function controllerRef(owner: Obj, apiVersion: string, kind: string): Obj {
  return { apiVersion, kind, name: nameOf(owner), uid: uidOf(owner), controller: true, blockOwnerDeletion: true };
}

export function selects(selector: unknown, labels: unknown): boolean {
  return labelsMatch(selector, isObj(labels) ? (labels as Record<string, string>) : {});
}

export function condition(o: Obj, type: string): Obj | undefined {
  return objList(statusOf(o)["conditions"]).find((c) => c["type"] === type);
}

export function isTerminating(o: Obj): boolean {
  return metaOf(o)["deletionTimestamp"] !== undefined;
}

export function isPodReady(pod: Obj): boolean {
  return condition(pod, "Ready")?.["status"] === "True";
}

/**
 * Ready for minReadySeconds (upstream IsPodAvailable): true, or the milliseconds until it will be; false when not
 * ready at all.
 */
export function podAvailability(pod: Obj, minReadySeconds: number, now: number): true | false | number {
  const ready = condition(pod, "Ready");
  if (ready?.["status"] !== "True") return false;
  if (minReadySeconds <= 0) return true;
  const since = Date.parse(String(ready["lastTransitionTime"] ?? ""));
  if (Number.isNaN(since)) return true;
  const wait = since + minReadySeconds * 1000 - now;
  return wait <= 0 ? true : wait;
}

/** Counts of pods and the earliest time one becomes available (for a requeue). */
export function countPods(pods: Obj[], minReadySeconds: number, now: number) {
  let ready = 0;
  let available = 0;
  let nextMs: number | undefined;
  for (const p of pods) {
    const a = podAvailability(p, minReadySeconds, now);
    if (a !== false) ready++;
    if (a === true) available++;
    else if (typeof a === "number") nextMs = Math.min(nextMs ?? a, a);
  }
  return { ready, available, nextMs };
}

/** k8s.io/apimachinery's util/rand SafeEncodeString alphabet: no vowels, no 0/1/3, so no words and no look-alikes. */
const SAFE = "bcdfghjklmnpqrstvwxz2456789";

/** A hash of a pod template as kube-controller-manager names things with it (fnv32a, then SafeEncodeString). */
export function templateHash(value: unknown, collisionCount = 0): string {
  let h = 0x811c9dc5;
  const text = stableJson(value) + (collisionCount > 0 ? `#${collisionCount}` : "");
  for (const byte of Buffer.from(text, "utf8")) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return [...String(h)].map((c) => SAFE[c.charCodeAt(0) % SAFE.length]).join("");
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (isObj(v))
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

/** An int-or-percent of total (upstream GetScaledValueFromIntOrPercent). */
export function scaled(value: unknown, total: number, roundUp: boolean): number {
  if (typeof value === "number") return value;
  if (typeof value === "string" && /^\d+%$/.test(value)) {
    const x = (Number(value.slice(0, -1)) * total) / 100;
    return roundUp ? Math.ceil(x) : Math.floor(x);
  }
  if (typeof value === "string" && /^\d+$/.test(value)) return Number(value);
  return 0;
}

/** metav1.Time now. */
export function nowTime(now = Date.now()): string {
  return new Date(now).toISOString().replace(/\.\d+Z$/, "Z");
}
