import type { KubeClient } from "../kube/client.ts";
import { ReconcileError } from "./errors.ts";

// Leader gating of every write: a replica that lost (or never had) the lease writes nothing, to Kubernetes or to the
// service, even in the middle of a reconcile.

/** A process that lost its lease stops writing at once, even in the middle of a reconcile. */
class NotLeaderError extends ReconcileError {
  constructor(what: string) {
    super("ReconcileError", `${what} skipped: this replica is not the leader`);
    this.name = "NotLeaderError";
  }
}

/** The remote definition's write methods refuse to run on a replica that is not the leader. */
export function gateApiWrites<Api extends object>(api: Api, writes: ReadonlySet<string>, canWrite: () => boolean): Api {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== "string" || typeof value !== "function" || !writes.has(prop)) return value;
      return (...args: unknown[]) => {
        if (!canWrite()) return Promise.reject(new NotLeaderError(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** Counts Kubernetes writes by verb and resource (zero in a steady-state resync is a benchmark goal) and refuses them without the lease. */
export function countWrites(
  kube: KubeClient,
  counter: { inc(labels: { verb: string; resource: string }): void },
  canWrite: () => boolean,
): KubeClient {
  const gate = (verb: string, type: { plural: string }) => {
    if (!canWrite()) throw new NotLeaderError(`${verb} ${type.plural}`);
  };
  return {
    get: kube.get.bind(kube),
    list: kube.list.bind(kube),
    async create(type, obj) {
      gate("create", type);
      counter.inc({ verb: "create", resource: type.plural });
      return kube.create(type, obj);
    },
    async replace(type, obj) {
      gate("update", type);
      counter.inc({ verb: "update", resource: type.plural });
      return kube.replace(type, obj);
    },
    async patch(type, ns, name, patch) {
      gate("patch", type);
      counter.inc({ verb: "patch", resource: type.plural });
      return kube.patch(type, ns, name, patch);
    },
    async patchStatus(type, ns, name, patch) {
      gate("patch", type);
      counter.inc({ verb: "patch", resource: `${type.plural}/status` });
      return kube.patchStatus(type, ns, name, patch);
    },
    ...(kube.apply === undefined
      ? {}
      : {
          async apply(type, obj, manager) {
            gate("patch", type);
            counter.inc({ verb: "patch", resource: type.plural });
            return kube.apply!(type, obj, manager);
          },
        }),
    async delete(type, ns, name, o) {
      gate("delete", type);
      counter.inc({ verb: "delete", resource: type.plural });
      return kube.delete(type, ns, name, o);
    },
  };
}
