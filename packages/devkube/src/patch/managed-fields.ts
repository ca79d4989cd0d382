// metadata.managedFields entries <-> manager field sets, keyed like kube's fieldmanager
// (BuildManagerIdentifier: manager + operation + subresource, plus apiVersion for Update).
import type { FieldNode, ListType, ListTypeLookup } from "./field-set.ts";
import { difference, emptySet, fromFieldsV1, isEmpty, toFieldSet, toFieldsV1 } from "./field-set.ts";
import type { JsonObject } from "./json.ts";
import { isObject } from "./json.ts";

export interface Manager {
  manager: string;
  operation: "Apply" | "Update";
  apiVersion: string;
  time?: string;
  subresource?: string;
  set: FieldNode;
}

export type ListTypes = (path: string[]) => ListType | undefined;

export function managerKey(m: {
  manager: string;
  operation: string;
  apiVersion: string;
  subresource?: string | undefined;
}): string {
  return JSON.stringify([m.manager, m.operation, m.operation === "Update" ? m.apiVersion : "", m.subresource ?? ""]);
}

/** Lists with built-in semantics that every kind shares (and conditions, conventionally keyed by type). */
export function withBuiltinListTypes(listTypes: ListTypes | undefined): ListTypeLookup {
  return (path) => {
    const given = listTypes?.(path);
    if (given !== undefined) return given;
    const p = path.join(".");
    if (p === "metadata.finalizers") return { type: "set" };
    if (p === "metadata.ownerReferences") return { type: "map", keys: ["uid"] };
    if (p === "status.conditions") return { type: "map", keys: ["type"] };
    return { type: "atomic" };
  };
}

/** Parses metadata.managedFields; entries with the same identity are merged. */
export function decodeManagedFields(obj: JsonObject | undefined): Map<string, Manager> {
  const out = new Map<string, Manager>();
  const meta = obj?.["metadata"];
  const entries = isObject(meta) ? meta["managedFields"] : undefined;
  if (!Array.isArray(entries)) return out;
  for (const e of entries) {
    if (!isObject(e) || typeof e["manager"] !== "string") continue;
    const operation = e["operation"] === "Apply" ? "Apply" : "Update";
    const m: Manager = {
      manager: e["manager"],
      operation,
      apiVersion: typeof e["apiVersion"] === "string" ? e["apiVersion"] : "",
      set: fromFieldsV1(e["fieldsV1"]),
    };
    if (typeof e["time"] === "string") m.time = e["time"];
    if (typeof e["subresource"] === "string" && e["subresource"] !== "") m.subresource = e["subresource"];
    const key = managerKey(m);
    const prev = out.get(key);
    if (prev !== undefined) m.set = unionInto(prev.set, m.set);
    out.set(key, m);
  }
  return out;
}

function unionInto(a: FieldNode, b: FieldNode): FieldNode {
  const merged: FieldNode = { member: a.member || b.member, children: new Map(a.children) };
  for (const [k, c] of b.children)
    merged.children.set(k, merged.children.has(k) ? unionInto(merged.children.get(k) ?? emptySet(), c) : c);
  return merged;
}

/** kube's sortEncodedManagedFields order: operation, time, manager, apiVersion, subresource. */
export function encodeManagedFields(managers: Iterable<Manager>): JsonObject[] {
  const list = [...managers].filter((m) => !isEmpty(m.set));
  const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  const seconds = (t: string | undefined): number => (t === undefined ? 0 : Math.floor(Date.parse(t) / 1000));
  list.sort(
    (p, q) =>
      cmp(p.operation, q.operation) ||
      seconds(p.time) - seconds(q.time) ||
      cmp(p.manager, q.manager) ||
      cmp(p.apiVersion, q.apiVersion) ||
      cmp(p.subresource ?? "", q.subresource ?? ""),
  );
  return list.map((m) => {
    const e: JsonObject = { manager: m.manager, operation: m.operation, apiVersion: m.apiVersion };
    if (m.time !== undefined) e["time"] = m.time;
    e["fieldsType"] = "FieldsV1";
    e["fieldsV1"] = toFieldsV1(m.set);
    if (m.subresource !== undefined) e["subresource"] = m.subresource;
    return e;
  });
}

// Fields no manager owns (fieldmanager stripmeta): identity and server-maintained metadata.
const stripped = fromFieldsV1({
  "f:apiVersion": {},
  "f:kind": {},
  "f:metadata": {
    "f:name": {},
    "f:namespace": {},
    "f:creationTimestamp": {},
    "f:deletionTimestamp": {},
    "f:deletionGracePeriodSeconds": {},
    "f:selfLink": {},
    "f:uid": {},
    "f:clusterName": {},
    "f:generation": {},
    "f:managedFields": {},
    "f:resourceVersion": {},
  },
});

export function stripManaged(s: FieldNode): FieldNode {
  const out = difference(s, stripped);
  // "metadata" as a bare member (an empty metadata map) is not ownership of anything
  const meta = out.children.get("f:metadata");
  if (meta !== undefined) {
    meta.member = false;
    if (isEmpty(meta)) out.children.delete("f:metadata");
  }
  return out;
}

/** The owned-field set of an object (or applied configuration). */
export function ownedFields(obj: unknown, lookup: ListTypeLookup): FieldNode {
  return stripManaged(toFieldSet(obj, [], lookup));
}
