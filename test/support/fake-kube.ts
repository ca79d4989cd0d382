import type { DeleteOptions, KubeClient, ListOptions } from "../../src/kube/client.ts";
import { KubeAlreadyExistsError, KubeConflictError, KubeNotFoundError } from "../../src/kube/errors.ts";
import type { KubeObject, ObjectList, ResourceType } from "../../src/kube/types.ts";
import { parseKubeConfig } from "../../src/kube/kubeconfig.ts";

// An in-memory KubeClient for unit tests of the loop: resourceVersion checks (409 on a stale one), generation
// bumps on spec changes, status only through patchStatus, finalizers holding deletion. Not an apiserver:
// the end-to-end tests run against devkube with the real kubectl.

export interface FakeKube extends KubeClient {
  objects: Map<string, KubeObject>;
  /** Writes by verb, for "nothing written in a steady-state reconcile" assertions. */
  writes: { verb: string; resource: string; name: string }[];
  put(type: ResourceType, obj: KubeObject): KubeObject;
  read<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string): T | undefined;
  /** A cache view of one type (what an informer would hold). */
  cache<T extends KubeObject>(
    type: ResourceType,
  ): { get(ns: string | undefined, name: string): T | undefined; list(): T[] };
}

const clone = <T>(v: T): T => structuredClone(v);

function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return clone(patch);
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

export function createFakeKube(): FakeKube {
  const objects = new Map<string, KubeObject>();
  const writes: FakeKube["writes"] = [];
  let rv = 1;
  let uid = 1;
  const keyOf = (type: ResourceType, ns: string | undefined, name: string) => `${type.plural}|${ns ?? ""}/${name}`;

  function store(type: ResourceType, obj: KubeObject): KubeObject {
    const o = clone(obj);
    o.metadata.resourceVersion = String(++rv);
    const key = keyOf(type, o.metadata.namespace, o.metadata.name);
    // Deletion completes when the last finalizer goes.
    if (o.metadata.deletionTimestamp !== undefined && (o.metadata.finalizers ?? []).length === 0) {
      objects.delete(key);
      return clone(o);
    }
    objects.set(key, o);
    return clone(o);
  }

  function existing(type: ResourceType, ns: string | undefined, name: string): KubeObject {
    const o = objects.get(keyOf(type, ns, name));
    if (o === undefined)
      throw new KubeNotFoundError(`${type.kind} "${name}" not found`, { status: 404, code: "not_found" });
    return o;
  }

  function checkVersion(current: KubeObject, wanted: string | undefined) {
    if (wanted !== undefined && wanted !== current.metadata.resourceVersion) {
      throw new KubeConflictError(`the object has been modified`, {
        status: 409,
        code: "conflict",
        reason: "Conflict",
      });
    }
  }

  const kube: FakeKube = {
    objects,
    writes,
    put(type, obj) {
      const o = clone(obj);
      o.metadata.uid ??= `uid-${uid++}`;
      o.metadata.generation ??= 1;
      o.metadata.creationTimestamp ??= new Date().toISOString();
      return store(type, o);
    },
    read(type, ns, name) {
      const o = objects.get(keyOf(type, ns, name));
      return o === undefined ? undefined : (clone(o) as never);
    },
    cache(type) {
      return {
        get: (ns, name) => kube.read(type, ns, name),
        list: () =>
          [...objects.entries()].filter(([k]) => k.startsWith(`${type.plural}|`)).map(([, o]) => clone(o) as never),
      };
    },
    async get<T extends KubeObject>(type: ResourceType, ns: string | undefined, name: string) {
      return kube.read<T>(type, ns, name);
    },
    async list<T extends KubeObject>(type: ResourceType, o: ListOptions = {}): Promise<ObjectList<T>> {
      const items = kube
        .cache<T>(type)
        .list()
        .filter((x) => o.namespace === undefined || x.metadata.namespace === o.namespace);
      return { items, metadata: { resourceVersion: String(rv) } };
    },
    async create(type, obj) {
      writes.push({ verb: "create", resource: type.plural, name: obj.metadata.name });
      if (objects.has(keyOf(type, obj.metadata.namespace, obj.metadata.name))) {
        throw new KubeAlreadyExistsError(`${type.kind} "${obj.metadata.name}" already exists`, {
          status: 409,
          code: "already_exists",
          reason: "AlreadyExists",
        });
      }
      return kube.put(type, obj) as never;
    },
    async replace(type, obj) {
      writes.push({ verb: "update", resource: type.plural, name: obj.metadata.name });
      const current = existing(type, obj.metadata.namespace, obj.metadata.name);
      checkVersion(current, obj.metadata.resourceVersion);
      const next = clone(obj);
      next.metadata.uid = current.metadata.uid;
      next.metadata.creationTimestamp = current.metadata.creationTimestamp;
      return store(type, next) as never;
    },
    async patch(type, ns, name, patch) {
      writes.push({ verb: "patch", resource: type.plural, name });
      const current = existing(type, ns, name);
      const p = clone(patch) as { metadata?: { resourceVersion?: string }; status?: unknown };
      checkVersion(current, p.metadata?.resourceVersion);
      if (p.metadata) delete p.metadata.resourceVersion;
      delete p.status;
      const next = mergePatch(current, p) as KubeObject;
      if (JSON.stringify(next["spec"]) !== JSON.stringify(current["spec"]))
        next.metadata.generation = (current.metadata.generation ?? 1) + 1;
      return store(type, next) as never;
    },
    async patchStatus(type, ns, name, patch) {
      writes.push({ verb: "patch", resource: `${type.plural}/status`, name });
      const current = existing(type, ns, name);
      const p = patch as { metadata?: { resourceVersion?: string }; status?: unknown };
      checkVersion(current, p.metadata?.resourceVersion);
      const next = clone(current);
      next["status"] = mergePatch(current["status"], p.status);
      return store(type, next) as never;
    },
    // Server-side apply as a merge of the applied fields (it never drops what an earlier apply named: enough for an
    // annotation that only changes value).
    async apply(type, obj, manager) {
      writes.push({ verb: `apply:${manager}`, resource: type.plural, name: obj.metadata.name });
      const current = existing(type, obj.metadata.namespace, obj.metadata.name);
      const { apiVersion: _v, kind: _k, ...fields } = clone(obj);
      const next = mergePatch(current, fields) as KubeObject;
      if (JSON.stringify(next["spec"]) !== JSON.stringify(current["spec"]))
        next.metadata.generation = (current.metadata.generation ?? 1) + 1;
      return store(type, next) as never;
    },
    async delete(type, ns, name, o: DeleteOptions = {}) {
      writes.push({ verb: "delete", resource: type.plural, name });
      const current = objects.get(keyOf(type, ns, name));
      if (current === undefined) return;
      if (o.uid !== undefined && o.uid !== current.metadata.uid)
        throw new KubeConflictError("uid precondition failed", { status: 409, code: "conflict" });
      if ((current.metadata.finalizers ?? []).length > 0) {
        const next = clone(current);
        next.metadata.deletionTimestamp ??= new Date().toISOString();
        store(type, next);
        return;
      }
      objects.delete(keyOf(type, ns, name));
    },
  };
  return kube;
}

/**
 * A kubeconfig whose server nothing listens on: for an informer that lists through a fake client; its watch fails
 * and backs off.
 */
export const unreachableKubeConfig = () =>
  parseKubeConfig(
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: "http://127.0.0.1:9" } }],
      users: [{ name: "u", user: { token: "t" } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
