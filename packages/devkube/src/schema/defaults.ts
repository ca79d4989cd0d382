// Structural defaulting (apiextensions pkg/apiserver/schema/defaulting): a property's default is
// applied when the property is absent, or null while not nullable; defaults go only into parents that
// exist. Non-nullable nulls without a default are dropped first (PruneNonNullableNullsWithoutDefaults).
import type { JsonObject, Node } from "./types.ts";
import { isObject } from "./types.ts";

function isNonNullableNull(v: unknown, node: Node): boolean {
  return v === null && !node.nullable;
}

function dropNulls(value: unknown, node: Node | undefined): void {
  if (node === undefined) return;
  if (Array.isArray(value)) {
    for (const item of value) dropNulls(item, node.items);
    return;
  }
  if (!isObject(value)) return;
  for (const key of Object.keys(value)) {
    const prop = node.properties?.[key] ?? (node.additionalProperties !== true ? node.additionalProperties : undefined);
    if (prop === undefined) continue;
    if (isNonNullableNull(value[key], prop) && !prop.hasDefault) delete value[key];
    else dropNulls(value[key], prop);
  }
}

function applyDefaultsTo(value: unknown, node: Node | undefined): void {
  if (node === undefined) return;
  if (Array.isArray(value)) {
    const items = node.items;
    if (items === undefined) return;
    value.forEach((v, i) => {
      if (isNonNullableNull(v, items) && items.hasDefault) value[i] = structuredClone(items.default);
      applyDefaultsTo(value[i], items);
    });
    return;
  }
  if (!isObject(value)) return;
  for (const [key, prop] of Object.entries(node.properties ?? {})) {
    if (!prop.hasDefault) continue;
    if (!Object.hasOwn(value, key) || isNonNullableNull(value[key], prop)) value[key] = structuredClone(prop.default);
  }
  for (const key of Object.keys(value)) {
    const prop = node.properties?.[key];
    if (prop !== undefined) applyDefaultsTo(value[key], prop);
    else if (node.additionalProperties !== undefined && node.additionalProperties !== true) {
      const ap = node.additionalProperties;
      if (isNonNullableNull(value[key], ap) && ap.hasDefault) value[key] = structuredClone(ap.default);
      applyDefaultsTo(value[key], ap);
    }
  }
}

/** Returns a defaulted deep copy. */
export function applyDefaults(obj: JsonObject, root: Node): JsonObject {
  const copy = structuredClone(obj);
  dropNulls(copy, root);
  applyDefaultsTo(copy, root);
  return copy;
}
