import type { z } from "zod";
import type { ObjectCache } from "../../operator/controller.ts";
import type { KubeObject } from "../../kube/types.ts";
import { parseLeniently } from "../../operator/lenient.ts";

// How one kind reads another's objects from the operator's caches: parsed with that kind's schema, never cast by
// hand. Informer objects are replaced, never changed, on every update, so each version is parsed once (a WeakMap on
// the object). Its status is read leniently, as its own kind reads it (src/operator/lenient.ts). An object the schema
// refuses otherwise reads as absent: the apiserver validated it against the same schema
// (the CRD is generated from it), so that is an object its own kind reports InvalidSpec for.

interface TypedCache<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): T[];
}

export function typedReader<T>(schema: z.ZodType<T>) {
  const parsed = new WeakMap<KubeObject, T | null>();
  function read(obj: KubeObject | undefined): T | undefined {
    if (obj === undefined) return undefined;
    let value = parsed.get(obj);
    if (value === undefined) {
      const result = schema.safeParse(obj);
      value = result.success ? result.data : (parseLeniently(schema, obj, result.error.issues) ?? null);
      parsed.set(obj, value);
    }
    return value ?? undefined;
  }
  return {
    read,
    of: (cache: ObjectCache): TypedCache<T> => ({
      get: (namespace, name) => read(cache.get(namespace, name)),
      list: (namespace) => cache.list(namespace).flatMap((o) => read(o) ?? []),
    }),
  };
}
