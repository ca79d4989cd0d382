import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { createInformer, type Informer } from "../kube/informer.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";
import type { KubeObject, ResourceType } from "../kube/types.ts";
import type { WireCodec } from "../kube/wire-codec.ts";
import type { ObjectCache } from "./controller.ts";
import { remoteIdOf } from "./identity.ts";
import { splitKey } from "./status.ts";

// What the operator caches: one informer per watched type and namespace (all namespaces, or each chosen one), seen as
// one cache per type, and an index of the kinds' objects by the remote id they name, so a remote change wakes them
// without a scan.

type WatchEvent = "add" | "update" | "delete";

export interface Caches {
  /** Watches `type` (optionally by label) in the watched namespaces; `onEvent` sees every change. */
  watch(type: ResourceType, onEvent: (event: WatchEvent, obj: KubeObject) => void, labelSelector?: string): ObjectCache;
  start(): Promise<void>;
  stop(): Promise<void>;
  hasSynced(): boolean;
}

export function createCaches(args: {
  kubeConfig: KubeConfig;
  kube: KubeClient;
  codec: WireCodec | undefined;
  /** undefined: all namespaces. */
  namespaces: (string | undefined)[];
  logger: Logger;
}): Caches {
  const informers: Informer<KubeObject>[] = [];
  return {
    watch(type, onEvent, labelSelector) {
      const parts = args.namespaces.map((namespace) =>
        createInformer<KubeObject>({
          kubeConfig: args.kubeConfig,
          client: args.kube,
          codec: args.codec,
          type,
          namespace,
          labelSelector,
          onEvent,
          logger: args.logger,
        }),
      );
      informers.push(...parts);
      return {
        get(ns, name) {
          for (const p of parts) {
            const o = p.get(ns, name);
            if (o !== undefined) return o;
          }
          return undefined;
        },
        list: (ns) => parts.flatMap((p) => p.list(ns)),
      };
    },
    start: async () => void (await Promise.all(informers.map((i) => i.start()))),
    stop: async () => void (await Promise.all(informers.map((i) => i.stop()))),
    hasSynced: () => informers.every((i) => i.hasSynced()),
  };
}

export function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}

/** The kinds' objects by the remote id they name ("Kind|namespace/name" entries), kept from the informers' events. */
export function createRemoteIdIndex() {
  const byRemoteId = new Map<string, Set<string>>();
  return {
    update(kind: string, obj: KubeObject, deleted: boolean): void {
      const id = remoteIdOf(obj);
      if (id === undefined) return;
      const entry = `${kind}|${keyOf(obj)}`;
      let set = byRemoteId.get(id);
      if (deleted) {
        set?.delete(entry);
        // No empty sets left behind: churn (create, delete, repeat) must not grow the index.
        if (set?.size === 0) byRemoteId.delete(id);
        return;
      }
      if (set === undefined) byRemoteId.set(id, (set = new Set()));
      set.add(entry);
    },
    /** The cached objects of `kind` listed under remote id `id` (an entry may be stale: callers re-check). */
    objects(kind: string, id: string, cache: ObjectCache): KubeObject[] {
      const found: KubeObject[] = [];
      for (const entry of byRemoteId.get(id) ?? []) {
        if (!entry.startsWith(`${kind}|`)) continue;
        const [ns, name] = splitKey(entry.slice(kind.length + 1));
        const obj = cache.get(ns, name);
        if (obj !== undefined) found.push(obj);
      }
      return found;
    },
    /** Every object, of any kind, listed under remote id `id`: its kind and key. */
    keys(id: string): { kind: string; key: string }[] {
      return [...(byRemoteId.get(id) ?? [])].map((entry) => {
        const [kind, key] = entry.split("|") as [string, string];
        return { kind, key };
      });
    },
  };
}
