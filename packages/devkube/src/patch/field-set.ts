// Field sets as sigs.k8s.io/structured-merge-diff models them, in the FieldsV1 encoding:
// path elements "f:<field>", "k:{<map-list keys>}", "v:<set value>", "i:<index>", and "." marking
// a node that is itself a member when it also has children.
import type { JsonObject } from "./json.ts";
import { deepEqual, isObject } from "./json.ts";

export interface FieldNode {
  member: boolean;
  children: Map<string, FieldNode>;
}

export type ListType = { type: "atomic" | "set" | "map"; keys?: string[] };
/** list type of the list at a path of field names (list items are transparent) */
export type ListTypeLookup = (path: string[]) => ListType;

export const emptySet = (): FieldNode => ({ member: false, children: new Map() });

export function isEmpty(s: FieldNode): boolean {
  return !s.member && s.children.size === 0;
}

function prune(s: FieldNode): FieldNode {
  for (const [k, c] of s.children) {
    prune(c);
    if (isEmpty(c)) s.children.delete(k);
  }
  return s;
}

export function union(a: FieldNode, b: FieldNode): FieldNode {
  const out: FieldNode = { member: a.member || b.member, children: new Map() };
  for (const k of new Set([...a.children.keys(), ...b.children.keys()])) {
    out.children.set(k, union(a.children.get(k) ?? emptySet(), b.children.get(k) ?? emptySet()));
  }
  return out;
}

export function difference(a: FieldNode, b: FieldNode): FieldNode {
  const out: FieldNode = { member: a.member && !b.member, children: new Map() };
  for (const [k, c] of a.children) {
    const other = b.children.get(k);
    out.children.set(k, other === undefined ? copy(c) : difference(c, other));
  }
  return prune(out);
}

export function intersection(a: FieldNode, b: FieldNode): FieldNode {
  const out: FieldNode = { member: a.member && b.member, children: new Map() };
  for (const [k, c] of a.children) {
    const other = b.children.get(k);
    if (other !== undefined) out.children.set(k, intersection(c, other));
  }
  return prune(out);
}

function copy(s: FieldNode): FieldNode {
  return { member: s.member, children: new Map([...s.children].map(([k, c]) => [k, copy(c)])) };
}

export function equalSets(a: FieldNode, b: FieldNode): boolean {
  return isEmpty(difference(a, b)) && isEmpty(difference(b, a));
}

/** Restricts a set to the subtree under one top-level element (e.g. "f:status"). */
export function only(s: FieldNode, element: string): FieldNode {
  const out = emptySet();
  const c = s.children.get(element);
  if (c !== undefined) out.children.set(element, copy(c));
  return out;
}

// --- FieldsV1 encoding -------------------------------------------------------------------------

function rank(k: string): number {
  if (k === ".") return 0;
  return { f: 1, k: 2, v: 3, i: 4 }[k[0] ?? ""] ?? 5;
}

function compareElements(a: string, b: string): number {
  const r = rank(a) - rank(b);
  if (r !== 0) return r;
  return a < b ? -1 : a > b ? 1 : 0;
}

export function toFieldsV1(s: FieldNode): JsonObject {
  const out: JsonObject = {};
  const keys = [...s.children.keys()].sort(compareElements);
  if (s.member && keys.length > 0) out["."] = {};
  for (const k of keys) {
    const c = s.children.get(k);
    if (c !== undefined && !isEmpty(c)) out[k] = toFieldsV1(c);
  }
  return out;
}

export function fromFieldsV1(v: unknown): FieldNode {
  const out = emptySet();
  if (!isObject(v)) return out;
  const keys = Object.keys(v);
  for (const k of keys) {
    if (k === ".") {
      out.member = true;
      continue;
    }
    const child = fromFieldsV1(v[k]);
    if (child.children.size === 0) child.member = true;
    out.children.set(k, child);
  }
  return out;
}

// --- object -> set -----------------------------------------------------------------------------

function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(",")}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sortedJson(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

function keyElement(item: unknown, keys: string[]): string | undefined {
  if (!isObject(item)) return undefined;
  const key: JsonObject = {};
  for (const k of keys) {
    if (!Object.hasOwn(item, k)) return undefined;
    key[k] = item[k];
  }
  return `k:${sortedJson(key)}`;
}

const valueElement = (v: unknown): string => `v:${sortedJson(v)}`;

/** The element identifying each item of a list, by its list type (index for atomic-like fallbacks). */
export function itemElements(list: unknown[], lt: ListType): string[] {
  return list.map((item, i) => {
    if (lt.type === "map") return keyElement(item, lt.keys ?? []) ?? `i:${i}`;
    if (lt.type === "set") return valueElement(item);
    return `i:${i}`;
  });
}

// Map-typed (not struct) fields of built-in kinds. When such a map appears in an update, structured-
// merge-diff records the map itself as added too (".": {} in FieldsV1), unlike struct fields.
const builtinMaps = new Set(["metadata.labels", "metadata.annotations", "data", "binaryData", "stringData"]);

/**
 * The set of leaf fields (and associative list items) present in a value. `added` marks built-in
 * maps themselves as members, as a comparison reports a newly added map.
 */
export function toFieldSet(value: unknown, path: string[], lookup: ListTypeLookup, added = false): FieldNode {
  const out = emptySet();
  if (isObject(value)) {
    if (Object.keys(value).length === 0) {
      out.member = true;
      return out;
    }
    if (added && builtinMaps.has(path.join("."))) out.member = true;
    for (const [k, v] of Object.entries(value)) {
      const child = toFieldSet(v, [...path, k], lookup, added);
      out.children.set(`f:${k}`, child);
    }
    return out;
  }
  if (Array.isArray(value)) {
    const lt = lookup(path);
    if (lt.type === "atomic" || value.length === 0) {
      out.member = true;
      return out;
    }
    const elements = itemElements(value, lt);
    value.forEach((item, i) => {
      const el = elements[i] ?? `i:${i}`;
      if (lt.type === "set") out.children.set(el, { member: true, children: new Map() });
      else {
        const child = isObject(item) ? toFieldSet(item, path, lookup, added) : emptySet();
        child.member = true;
        out.children.set(el, child);
      }
    });
    return out;
  }
  out.member = true;
  return out;
}

// --- compare -----------------------------------------------------------------------------------

export interface Comparison {
  modified: FieldNode;
  added: FieldNode;
  removed: FieldNode;
}

function compareInto(
  a: unknown,
  b: unknown,
  path: string[],
  lookup: ListTypeLookup,
  out: Comparison,
  at: FieldNode[],
): void {
  // `at` holds the nodes of modified/added/removed at this position
  const [mod, add, rem] = at as [FieldNode, FieldNode, FieldNode];
  if (isObject(a) && isObject(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const el = `f:${k}`;
      const inA = Object.hasOwn(a, k);
      const inB = Object.hasOwn(b, k);
      if (inA && inB) {
        const nodes = [mod, add, rem].map((n) => child(n, el));
        compareInto(a[k], b[k], [...path, k], lookup, out, nodes);
      } else if (inB) add.children.set(el, toFieldSet(b[k], [...path, k], lookup, true));
      else rem.children.set(el, toFieldSet(a[k], [...path, k], lookup));
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const lt = lookup(path);
    if (lt.type !== "atomic" && a.length > 0 && b.length > 0) {
      const ea = itemElements(a, lt);
      const eb = itemElements(b, lt);
      for (const [i, el] of eb.entries()) {
        const j = ea.indexOf(el);
        if (j < 0) {
          const s = lt.type === "set" ? { member: true, children: new Map() } : toFieldSet(b[i], path, lookup, true);
          s.member = true;
          add.children.set(el, s);
        } else if (lt.type === "map") {
          const nodes = [mod, add, rem].map((n) => child(n, el));
          compareInto(a[j], b[i], path, lookup, out, nodes);
        }
      }
      for (const [j, el] of ea.entries()) {
        if (!eb.includes(el)) {
          const s = lt.type === "set" ? { member: true, children: new Map() } : toFieldSet(a[j], path, lookup);
          s.member = true;
          rem.children.set(el, s);
        }
      }
      return;
    }
  }
  if (!deepEqual(a, b)) mod.member = true;
}

function child(n: FieldNode, el: string): FieldNode {
  let c = n.children.get(el);
  if (c === undefined) {
    c = emptySet();
    n.children.set(el, c);
  }
  return c;
}

/** Which fields changed between two objects (structured-merge-diff TypedValue.Compare). */
export function compare(a: unknown, b: unknown, lookup: ListTypeLookup): Comparison {
  const out: Comparison = { modified: emptySet(), added: emptySet(), removed: emptySet() };
  compareInto(a, b, [], lookup, out, [out.modified, out.added, out.removed]);
  prune(out.modified);
  prune(out.added);
  prune(out.removed);
  return out;
}

// --- paths -------------------------------------------------------------------------------------

/** All member paths, each a list of elements, in sorted order. */
export function memberPaths(s: FieldNode, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  if (s.member) out.push(prefix);
  for (const k of [...s.children.keys()].sort(compareElements)) {
    const c = s.children.get(k);
    if (c !== undefined) out.push(...memberPaths(c, [...prefix, k]));
  }
  return out;
}

/** structured-merge-diff's Path.String(): ".spec.x", "[type=\"Ready\"]", "[=\"a\"]", "[0]". */
export function pathString(path: string[]): string {
  return path
    .map((el) => {
      const body = el.slice(2);
      switch (el[0]) {
        case "f":
          return `.${body}`;
        case "k": {
          const key = JSON.parse(body) as JsonObject;
          return `[${Object.keys(key)
            .map((k) => `${k}=${JSON.stringify(key[k])}`)
            .join(",")}]`;
        }
        case "v":
          return `[=${body}]`;
        default:
          return `[${body}]`;
      }
    })
    .join("");
}
