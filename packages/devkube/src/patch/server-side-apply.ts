// Server-side apply and managedFields bookkeeping, after sigs.k8s.io/structured-merge-diff's
// Updater (Apply/Update) and kube's fieldmanager: the applied configuration is merged into the live
// object; fields the applier owned before but no longer applies are removed unless someone else owns
// them; changing a field another manager owns is a conflict unless forced (ownership then moves).
import { PatchError } from "./errors.ts";
import type { Comparison, FieldNode, ListTypeLookup } from "./field-set.ts";
import {
  compare,
  difference,
  emptySet,
  equalSets,
  intersection,
  isEmpty,
  itemElements,
  memberPaths,
  only,
  pathString,
  union,
} from "./field-set.ts";
import type { JsonObject } from "./json.ts";
import { clone, isObject } from "./json.ts";
import type { ListTypes, Manager } from "./managed-fields.ts";
import {
  decodeManagedFields,
  encodeManagedFields,
  managerKey,
  ownedFields,
  stripManaged,
  withBuiltinListTypes,
} from "./managed-fields.ts";

export interface ApplyResult {
  object: Record<string, unknown>;
}

export interface ServerSideApplyArgs {
  live: Record<string, unknown> | undefined;
  applied: Record<string, unknown>;
  manager: string;
  force: boolean;
  subresource?: "status";
  /** RFC3339 time recorded in managedFields */
  now: string;
  listTypes?: ListTypes;
  /** main-resource write of a kind with a status subresource: status is neither merged nor owned */
  ignoreStatus?: boolean;
}

interface RecordUpdateArgs {
  old: Record<string, unknown> | undefined;
  updated: Record<string, unknown>;
  manager: string;
  operation: "Update";
  subresource?: "status";
  now: string;
  listTypes?: ListTypes;
  /** main-resource write of a kind with a status subresource: status changes are not recorded */
  ignoreStatus?: boolean;
}

// --- structured merge --------------------------------------------------------------------------

function mergeValues(live: unknown, applied: unknown, path: string[], lookup: ListTypeLookup): unknown {
  if (isObject(live) && isObject(applied)) {
    const out: JsonObject = clone(live);
    for (const [k, v] of Object.entries(applied)) {
      if (v === null) delete out[k];
      else out[k] = Object.hasOwn(live, k) ? mergeValues(live[k], v, [...path, k], lookup) : stripNulls(v);
    }
    return out;
  }
  if (Array.isArray(live) && Array.isArray(applied)) {
    const lt = lookup(path);
    if (lt.type !== "atomic") return mergeLists(live, applied, path, lookup);
  }
  return stripNulls(applied);
}

function stripNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripNulls);
  if (!isObject(v)) return clone(v);
  const out: JsonObject = {};
  for (const [k, c] of Object.entries(v)) if (c !== null) out[k] = stripNulls(c);
  return out;
}

/** structured-merge-diff visitListItems: live-only items keep their place, applied items their order. */
function mergeLists(lhs: unknown[], rhs: unknown[], path: string[], lookup: ListTypeLookup): unknown[] {
  const lt = lookup(path);
  const lEls = itemElements(lhs, lt);
  const rEls = itemElements(rhs, lt);
  const lIndex = new Map(lEls.map((e, i) => [e, i]));
  const rIndex = new Map(rEls.map((e, i) => [e, i]));
  const shared = rEls.filter((e) => lIndex.has(e));
  let nextShared = shared.shift();
  const merged = new Set<string>();
  const out: unknown[] = [];
  const item = (el: string): unknown => {
    const l = lIndex.get(el);
    const r = rIndex.get(el);
    if (r === undefined) return clone(lhs[l ?? 0]);
    if (l === undefined || lt.type === "set") return stripNulls(rhs[r]);
    return mergeValues(lhs[l], rhs[r], path, lookup);
  };
  const advance = (el: string): void => {
    if (nextShared === el) nextShared = shared.shift();
  };
  let li = 0;
  let ri = 0;
  while (li < lEls.length || ri < rEls.length) {
    const le = lEls[li];
    const re = rEls[ri];
    if (le !== undefined && re !== undefined) {
      if (le === re) {
        merged.add(le);
        out.push(item(le));
        li++;
        ri++;
        advance(le);
        continue;
      }
      if (rIndex.has(le) && nextShared !== undefined && nextShared !== le) {
        li++;
        continue;
      }
    }
    if (le !== undefined) {
      if (!rIndex.has(le)) {
        out.push(item(le));
        li++;
        continue;
      }
      if (merged.has(le)) {
        li++;
        continue;
      }
    }
    if (re !== undefined) {
      merged.add(re);
      out.push(item(re));
      ri++;
      advance(re);
    }
  }
  return out;
}

// --- removal of fields nobody owns any more ----------------------------------------------------

function removePath(obj: unknown, path: string[], fieldPath: string[], lookup: ListTypeLookup): void {
  const [el, ...rest] = path;
  if (el === undefined) return;
  if (el.startsWith("f:")) {
    if (!isObject(obj)) return;
    const name = el.slice(2);
    if (!Object.hasOwn(obj, name)) return;
    if (rest.length === 0) delete obj[name];
    else removePath(obj[name], rest, [...fieldPath, name], lookup);
    return;
  }
  if (!Array.isArray(obj)) return;
  const els = itemElements(obj, lookup(fieldPath));
  const i = els.indexOf(el);
  if (i < 0) return;
  if (rest.length === 0) obj.splice(i, 1);
  else removePath(obj[i], rest, fieldPath, lookup);
}

function removeFields(obj: JsonObject, set: FieldNode, lookup: ListTypeLookup): void {
  // shallowest first: a removed list item takes its fields along (items are found by key, not index)
  const paths = memberPaths(set).sort((a, b) => a.length - b.length);
  for (const p of paths) removePath(obj, p, [], lookup);
}

// --- managers ----------------------------------------------------------------------------------

function setMetadataManagedFields(obj: JsonObject, managers: Map<string, Manager>): JsonObject {
  const meta = isObject(obj["metadata"]) ? obj["metadata"] : {};
  const encoded = encodeManagedFields(managers.values());
  const out = { ...obj, metadata: { ...meta } } as JsonObject & { metadata: JsonObject };
  if (encoded.length > 0) out.metadata["managedFields"] = encoded;
  else delete out.metadata["managedFields"];
  return out;
}

function withoutManagedFields(obj: JsonObject | undefined): JsonObject | undefined {
  if (obj === undefined) return undefined;
  const meta = obj["metadata"];
  if (!isObject(meta) || !Object.hasOwn(meta, "managedFields")) return obj;
  const m = { ...meta };
  delete m["managedFields"];
  return { ...obj, metadata: m };
}

function changed(c: Comparison): FieldNode {
  return stripManaged(union(c.modified, c.added));
}

function conflictError(conflicts: { manager: Manager; path: string[] }[]): PatchError {
  const describe = (m: Manager): string => {
    let s = JSON.stringify(m.manager);
    if (m.subresource !== undefined) s += ` with subresource ${JSON.stringify(m.subresource)}`;
    if (m.operation === "Update") s += ` using ${m.apiVersion}`;
    return s;
  };
  const causes = conflicts.map((c) => ({
    type: "FieldManagerConflict",
    message: `conflict with ${describe(c.manager)}`,
    field: pathString(c.path),
  }));
  let message: string;
  const first = conflicts[0];
  if (conflicts.length === 1 && first !== undefined) {
    message = `Apply failed with 1 conflict: conflict with ${describe(first.manager)}: ${pathString(first.path)}`;
  } else {
    const byManager = new Map<string, { m: Manager; paths: string[][] }>();
    for (const c of conflicts) {
      const d = describe(c.manager);
      const entry = byManager.get(d) ?? { m: c.manager, paths: [] };
      entry.paths.push(c.path);
      byManager.set(d, entry);
    }
    const lines: string[] = [];
    for (const d of [...byManager.keys()].sort()) {
      lines.push(`conflicts with ${d}:`);
      for (const p of byManager.get(d)?.paths ?? []) lines.push(`- ${pathString(p)}`);
    }
    message = `Apply failed with ${conflicts.length} conflicts: ${lines.join("\n")}`;
  }
  return new PatchError(409, "Conflict", message, { causes });
}

/**
 * Server-side apply of `applied` onto `live` (undefined: create). Returns the new object with
 * metadata.managedFields maintained; throws PatchError 409 Conflict unless `force`.
 * With subresource "status" only the status of the applied configuration is merged and owned.
 * The caller resets fields the endpoint may not change (e.g. status on the main resource).
 */
export function serverSideApply(args: ServerSideApplyArgs): ApplyResult {
  const appliedMeta = args.applied["metadata"];
  if (isObject(appliedMeta) && appliedMeta["managedFields"] !== undefined && appliedMeta["managedFields"] !== null) {
    throw new PatchError(400, "BadRequest", "metadata.managedFields must be nil");
  }
  const lookup = withBuiltinListTypes(args.listTypes);
  const apiVersion = typeof args.applied["apiVersion"] === "string" ? args.applied["apiVersion"] : "";
  const live = withoutManagedFields(args.live);
  const managers = decodeManagedFields(args.live);
  let appliedSet = ownedFields(withoutManagedFields(args.applied), lookup);
  let config: JsonObject = withoutManagedFields(args.applied) ?? {};
  if (args.subresource === "status") {
    appliedSet = only(appliedSet, "f:status");
    config = Object.hasOwn(config, "status") ? { status: config["status"] } : {};
  } else if (args.ignoreStatus === true) {
    appliedSet = difference(appliedSet, only(appliedSet, "f:status"));
    config = { ...config };
    delete config["status"];
  }

  // An object never touched by managedFields-aware writers is owned by "before-first-apply".
  if (live !== undefined && managers.size === 0) {
    const set = ownedFields(live, lookup);
    if (!isEmpty(set)) {
      const m: Manager = { manager: "before-first-apply", operation: "Update", apiVersion, set };
      managers.set(managerKey(m), m);
    }
  }

  const self: Manager = { manager: args.manager, operation: "Apply", apiVersion, set: emptySet() };
  if (args.subresource !== undefined) self.subresource = args.subresource;
  const selfKey = managerKey(self);
  const previous = managers.get(selfKey);

  const base: JsonObject = live ?? {};
  let merged = mergeValues(base, config, [], lookup) as JsonObject;
  if (live === undefined) merged = stripNulls(withoutManagedFields(args.applied) ?? {}) as JsonObject;

  // conflicts: fields others own whose value this apply changes
  const touched = changed(compare(base, merged, lookup));
  const conflicts: { manager: Manager; path: string[] }[] = [];
  const conflictSets = new Map<string, FieldNode>();
  for (const [key, m] of managers) {
    if (key === selfKey) continue;
    const c = intersection(m.set, touched);
    if (isEmpty(c)) continue;
    conflictSets.set(key, c);
    for (const p of memberPaths(c)) conflicts.push({ manager: m, path: p });
  }
  if (conflicts.length > 0 && !args.force) throw conflictError(conflicts);
  for (const [key, c] of conflictSets) {
    const m = managers.get(key);
    if (m !== undefined) m.set = difference(m.set, c);
  }

  // fields this manager applied before but not now, owned by nobody else, are removed
  if (previous !== undefined) {
    let others = emptySet();
    for (const [key, m] of managers) if (key !== selfKey) others = union(others, m.set);
    const toRemove = difference(difference(previous.set, appliedSet), others);
    removeFields(merged, toRemove, lookup);
  }

  const final = compare(base, merged, lookup);
  for (const m of managers.values()) m.set = difference(m.set, final.removed);
  self.set = appliedSet;
  const objectChanged =
    live === undefined || !isEmpty(final.modified) || !isEmpty(final.added) || !isEmpty(final.removed);
  const managersChanged = previous === undefined || !equalSets(previous.set, appliedSet);
  if (objectChanged || managersChanged || previous?.time === undefined) self.time = args.now;
  else if (previous.time !== undefined) self.time = previous.time;
  managers.set(selfKey, self);
  return { object: setMetadataManagedFields(merged, managers) };
}

function requestedManagedFields(updated: JsonObject): "reset" | "keep" | "given" {
  const meta = updated["metadata"];
  const mf = isObject(meta) ? meta["managedFields"] : undefined;
  if (mf === undefined || (Array.isArray(mf) && mf.length === 0)) return "keep";
  if (Array.isArray(mf) && mf.length === 1 && isObject(mf[0]) && Object.keys(mf[0]).length === 0) return "reset";
  return "given";
}

/**
 * Maintains metadata.managedFields for a non-apply write (create, update, patch): the manager's
 * Update entry gains the fields it changed, other managers lose them, and fields that disappeared
 * are dropped from every manager. Clients may replace managedFields (kubectl's CSA->SSA migration);
 * `[{}]` resets them, an empty list keeps the stored ones.
 */
export function recordUpdate(args: RecordUpdateArgs): Record<string, unknown> {
  const lookup = withBuiltinListTypes(args.listTypes);
  const apiVersion = typeof args.updated["apiVersion"] === "string" ? args.updated["apiVersion"] : "";
  // subresource writes cannot touch managedFields (fieldmanager ignoreManagedFieldsFromRequestObject)
  const requested = args.subresource !== undefined ? "keep" : requestedManagedFields(args.updated);
  const managers =
    requested === "keep"
      ? decodeManagedFields(args.old)
      : requested === "given"
        ? decodeManagedFields(args.updated)
        : new Map<string, Manager>();
  const old = withoutManagedFields(args.old);
  const updated = withoutManagedFields(args.updated) ?? {};
  const c = compare(old ?? {}, updated, lookup);
  let gained = changed(c);
  if (args.subresource === "status") gained = only(gained, "f:status");
  else if (args.ignoreStatus === true) gained = difference(gained, only(gained, "f:status"));
  const removed = stripManaged(c.removed);
  for (const m of managers.values()) m.set = difference(difference(m.set, gained), removed);

  const self: Manager = { manager: args.manager, operation: args.operation, apiVersion, set: emptySet() };
  if (args.subresource !== undefined) self.subresource = args.subresource;
  const key = managerKey(self);
  const prev = managers.get(key);
  if (!isEmpty(gained)) {
    self.set = union(prev?.set ?? emptySet(), gained);
    self.time = args.now;
    managers.set(key, self);
  }
  return setMetadataManagedFields(updated, managers);
}
