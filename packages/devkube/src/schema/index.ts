// Structural schemas (CRD openAPIV3Schema): pruning, defaulting, validation and CEL rules with
// kube-apiserver's semantics and wording. Pure: no I/O.
import type { FieldError } from "./errors.ts";
import { SchemaError, aggregateMessage, invalid } from "./errors.ts";
import type { JsonObject, Node } from "./types.ts";
import { deepEqual } from "./types.ts";
import { parseStructural } from "./structural.ts";
import { prune, pruneInPlace } from "./prune.ts";
import { applyDefaults } from "./defaults.ts";
import { validateDefault, validateObject } from "./validate.ts";
export { SchemaError, invalidStatus, formatFieldError, errorBody } from "./errors.ts";
export { objectMetaFields } from "./prune.ts";

type ListTypeInfo = { type: "atomic" | "set" | "map"; keys?: string[] };

export interface CompiledSchema {
  /** Drops unknown fields (never apiVersion/kind/metadata at the root); returns their paths for fieldValidation=Strict/Warn. */
  prune(obj: Record<string, unknown>): { object: Record<string, unknown>; unknownFields: string[] };
  /** Applies defaults (on write and on read), after dropping non-nullable nulls without a default. */
  applyDefaults(obj: Record<string, unknown>): Record<string, unknown>;
  /** Schema validation then x-kubernetes-validations; with oldObj: transition rules and ratcheting. */
  validate(obj: Record<string, unknown>, oldObj?: Record<string, unknown>): FieldError[];
  /**
   * x-kubernetes-list-type info for the list at `path` (field names from the root; list items are
   * transparent: ["spec","ports"] or ["spec","items","tags"]), for serverSideApply's listTypes.
   * Lists without a declared type are "atomic" (the CRD default).
   */
  listTypes(path: string[]): ListTypeInfo | undefined;
}

function checkDefaults(node: Node, schemaPath: string, dataPath: string, errors: FieldError[]): void {
  const sp = (p: string): string => (schemaPath === "" ? p : `${schemaPath}.${p}`);
  const dp = (p: string): string => (dataPath === "" ? p : `${dataPath}.${p}`);
  if (node.hasDefault) {
    const pruned = structuredClone(node.default);
    pruneInPlace(pruned, node);
    if (!deepEqual(pruned, node.default)) {
      errors.push(invalid(sp("default"), node.default, "must not have unknown fields"));
    } else if (node.default === null && !node.nullable) {
      // a null default on a non-nullable field is dropped on write; kube rejects it at CRD creation
      errors.push(invalid(sp("default"), null, "must not be null for non-nullable schema"));
    } else {
      for (const e of validateDefault(node.default, node, dataPath)) errors.push({ ...e, field: sp("default") });
    }
  }
  for (const [k, p] of Object.entries(node.properties ?? {})) checkDefaults(p, sp(`properties[${k}]`), dp(k), errors);
  if (node.items !== undefined) checkDefaults(node.items, sp("items"), `${dataPath}[0]`, errors);
  if (node.additionalProperties !== undefined && node.additionalProperties !== true) {
    checkDefaults(node.additionalProperties, sp("additionalProperties"), dp("key"), errors);
  }
}

function lookupList(root: Node, path: string[]): Node | undefined {
  let node: Node | undefined = root;
  for (const name of path) {
    while (node?.type === "array") node = node.items;
    if (node === undefined) return undefined;
    node = node.properties?.[name] ?? (node.additionalProperties !== true ? node.additionalProperties : undefined);
  }
  return node?.type === "array" ? node : undefined;
}

/** Compiles a CRD openAPIV3Schema; throws SchemaError listing every problem when it is not usable. */
export function compileSchema(openAPIV3Schema: unknown): CompiledSchema {
  const { root, errors } = parseStructural(openAPIV3Schema);
  if (errors.length === 0) checkDefaults(root, "", "", errors);
  if (errors.length > 0) throw new SchemaError(`invalid openAPIV3Schema: ${aggregateMessage(errors)}`, errors);
  return {
    prune: (obj) => prune(obj, root),
    applyDefaults: (obj: JsonObject) => applyDefaults(obj, root),
    validate: (obj, oldObj) => validateObject(obj, root, oldObj),
    listTypes: (path) => {
      const node = lookupList(root, path);
      if (node === undefined) return undefined;
      if (node.listType === "map" && node.listMapKeys !== undefined) return { type: "map", keys: node.listMapKeys };
      return { type: node.listType === "set" ? "set" : "atomic" };
    },
  };
}
