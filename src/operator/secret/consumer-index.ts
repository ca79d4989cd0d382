import type { KubeObject } from "../../kube/types.ts";
import { podSpecOf, secretsOfPodSpec } from "./consumers.ts";

// Which workloads and pods use which Secret, kept from informer events (index.ts feeds it when the operator follows
// consumers): a rotation asks it and lists nothing. Keyed by namespace: a pod can only use a Secret of its own
// namespace, so a Secret's consumers are never looked for anywhere else. Only what a rotation reads is kept of each
// object (a slim copy), and only of objects that use some Secret.

interface SecretConsumers {
  workloads: KubeObject[];
  pods: KubeObject[];
}

export interface ConsumerIndex {
  /** An informer event of `kind`; returns the "namespace/secret" keys whose consumers changed. */
  update(kind: string, obj: KubeObject, deleted: boolean): string[];
  /** The workloads and pods of `namespace` that use Secret `name` (the index's copies: never write them back). */
  of(namespace: string, name: string): SecretConsumers;
}

const ourAnnotations = (a: Record<string, string> | undefined) =>
  a === undefined
    ? undefined
    : Object.fromEntries(Object.entries(a).filter(([k]) => k.startsWith("rotation.mds.dev/")));

/** What a rotation reads of an object: identity, generation, the restart annotations, the rollout's spec and status. */
function slim(kind: string, obj: KubeObject): KubeObject {
  const meta = obj.metadata;
  const spec = (obj["spec"] ?? {}) as Record<string, unknown>;
  const status = obj["status"] as Record<string, unknown> | undefined;
  const base = {
    kind,
    metadata: {
      name: meta.name,
      namespace: meta.namespace,
      uid: meta.uid,
      generation: meta.generation,
      creationTimestamp: meta.creationTimestamp,
      annotations: ourAnnotations(meta.annotations),
    },
  };
  if (kind === "Pod") return { ...base, status: { phase: status?.["phase"] } };
  const template = spec["template"] as { metadata?: { annotations?: Record<string, string> } } | undefined;
  return {
    ...base,
    spec: {
      replicas: spec["replicas"],
      updateStrategy: spec["updateStrategy"],
      template: { metadata: { annotations: ourAnnotations(template?.metadata?.annotations) } },
    },
    status,
  };
}

export function createConsumerIndex(): ConsumerIndex {
  const objects = new Map<string, { obj: KubeObject; secrets: Set<string> }>(); // "Kind|ns/name"
  const bySecret = new Map<string, Set<string>>(); // "ns/secret" → "Kind|ns/name"

  return {
    update(kind, obj, deleted) {
      const ns = obj.metadata.namespace ?? "";
      const key = `${kind}|${ns}/${obj.metadata.name}`;
      const before = objects.get(key)?.secrets ?? new Set<string>();
      const after = deleted ? new Set<string>() : secretsOfPodSpec(podSpecOf({ ...obj, kind }));
      if (after.size === 0) objects.delete(key);
      else objects.set(key, { obj: slim(kind, obj), secrets: after });
      for (const name of before) {
        if (after.has(name)) continue;
        const set = bySecret.get(`${ns}/${name}`);
        set?.delete(key);
        // No empty sets left behind: churn must not grow the index.
        if (set?.size === 0) bySecret.delete(`${ns}/${name}`);
      }
      for (const name of after) {
        let set = bySecret.get(`${ns}/${name}`);
        if (set === undefined) bySecret.set(`${ns}/${name}`, (set = new Set()));
        set.add(key);
      }
      return [...new Set([...before, ...after])].map((name) => `${ns}/${name}`);
    },
    of(namespace, name) {
      const found: SecretConsumers = { workloads: [], pods: [] };
      for (const key of bySecret.get(`${namespace}/${name}`) ?? []) {
        const entry = objects.get(key);
        if (entry === undefined) continue;
        if (entry.obj.kind === "Pod") found.pods.push(entry.obj);
        else found.workloads.push(entry.obj);
      }
      return found;
    },
  };
}
