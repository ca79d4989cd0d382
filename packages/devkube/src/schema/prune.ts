// Pruning of unknown fields (apiextensions pkg/apiserver/schema/pruning): fields not declared in the
// schema are dropped unless x-kubernetes-preserve-unknown-fields is set at that node. apiVersion,
// kind and metadata are kept at the resource root and at x-kubernetes-embedded-resource nodes,
// where metadata is reduced to ObjectMeta's fields.
import type { JsonObject, Node } from "./types.ts";
import { isObject } from "./types.ts";

/** ObjectMeta's fields: what survives pruning of `metadata` (also in typed decoding of built-in kinds). */
export const objectMetaFields: ReadonlySet<string> = new Set([
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
]);

function pruneValue(
  value: unknown,
  node: Node | undefined,
  path: string,
  unknown: string[],
  isResourceRoot: boolean,
): void {
  if (node === undefined || node.intOrString) return;
  if (Array.isArray(value)) {
    value.forEach((item, i) => pruneValue(item, node.items, `${path}[${i}]`, unknown, false));
    return;
  }
  if (!isObject(value)) return;
  const resourceRoot = isResourceRoot || node.embeddedResource;
  for (const key of Object.keys(value)) {
    const childPath = path === "" ? key : `${path}.${key}`;
    if (resourceRoot && (key === "apiVersion" || key === "kind")) continue;
    if (resourceRoot && key === "metadata") {
      const meta = value[key];
      // the root's metadata is coerced to ObjectMeta by the server; embedded metadata is pruned here
      if (!isResourceRoot && isObject(meta)) {
        for (const mk of Object.keys(meta)) {
          if (!objectMetaFields.has(mk)) {
            unknown.push(`${childPath}.${mk}`);
            delete meta[mk];
          }
        }
      }
      continue;
    }
    const prop = node.properties?.[key];
    if (prop !== undefined) {
      pruneValue(value[key], prop, childPath, unknown, false);
      continue;
    }
    if (node.additionalProperties !== undefined) {
      if (node.additionalProperties !== true)
        pruneValue(value[key], node.additionalProperties, childPath, unknown, false);
      continue;
    }
    if (node.preserveUnknownFields) continue;
    unknown.push(childPath);
    delete value[key];
  }
}

/** Returns a pruned deep copy and the (sorted) paths of the dropped fields. */
export function prune(obj: JsonObject, root: Node): { object: JsonObject; unknownFields: string[] } {
  const copy = structuredClone(obj);
  const unknownFields: string[] = [];
  pruneValue(copy, root, "", unknownFields, true);
  unknownFields.sort();
  return { object: copy, unknownFields };
}

/** Prunes a value in place relative to its own node (used for schema defaults). */
export function pruneInPlace(value: unknown, node: Node): void {
  pruneValue(value, node, "", [], false);
}
