// Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch, StrategicMergePatch with the
// server's options): maps merge, null deletes, lists follow the field's patch strategy, and the
// directives $patch (replace|delete|merge), $retainKeys, $setElementOrder/<f>,
// $deleteFromPrimitiveList/<f> are honoured.
import { PatchError, badRequest } from "./errors.ts";
import type { JsonObject } from "./json.ts";
import { clone, deepEqual, isObject } from "./json.ts";
import type { ListStrategy } from "./patch-meta.ts";
import { listStrategy } from "./patch-meta.ts";

const directive = "$patch";
const retainKeys = "$retainKeys";
const setOrderPrefix = "$setElementOrder/";
const deletePrimitivePrefix = "$deleteFromPrimitiveList/";

type Lookup = (path: string[]) => ListStrategy;

function stripDirectives(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value
      .filter((v) => !(isObject(v) && v[directive] !== undefined && Object.keys(v).length === 1))
      .map(stripDirectives);
  }
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === directive || k === retainKeys || k.startsWith(setOrderPrefix) || k.startsWith(deletePrimitivePrefix))
      continue;
    if (v === null) continue; // nulls in new content delete nothing (IgnoreUnmatchedNulls)
    out[k] = stripDirectives(v);
  }
  return out;
}

function mergeMap(original: JsonObject, patch: JsonObject, path: string[], lookup: Lookup): JsonObject | undefined {
  const patchType = patch[directive];
  if (patchType !== undefined) {
    if (patchType === "replace") return stripDirectives(patch) as JsonObject;
    if (patchType === "delete") return undefined;
    if (patchType !== "merge")
      throw badRequest(`unknown patch type: ${String(patchType)} in map: ${JSON.stringify(patch)}`);
  }
  const out = clone(original);
  const retain = patch[retainKeys];
  if (retain !== undefined) {
    if (!Array.isArray(retain)) throw badRequest("invalid patch format of retainKeys");
    for (const k of Object.keys(patch)) {
      if (k === directive || k === retainKeys || k.startsWith(setOrderPrefix) || k.startsWith(deletePrimitivePrefix))
        continue;
      if (!retain.includes(k))
        throw new PatchError(422, "Invalid", "the server rejected our request due to an error in our request", {
          cause: new Error("patch content doesn't match retainKeys list"),
        });
    }
    for (const k of Object.keys(out)) if (!retain.includes(k)) delete out[k];
  }
  const orders: Record<string, unknown[]> = {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith(deletePrimitivePrefix)) {
      const field = k.slice(deletePrimitivePrefix.length);
      if (!Array.isArray(v)) throw badRequest("invalid patch format of primitive list");
      const cur = out[field];
      if (Array.isArray(cur)) out[field] = cur.filter((item) => !v.some((d) => deepEqual(d, item)));
    } else if (k.startsWith(setOrderPrefix)) {
      if (!Array.isArray(v)) throw badRequest("invalid patch format of setElementOrder list");
      orders[k.slice(setOrderPrefix.length)] = v;
    }
  }
  for (const [k, v] of Object.entries(patch)) {
    if (k === directive || k === retainKeys || k.startsWith(setOrderPrefix) || k.startsWith(deletePrimitivePrefix))
      continue;
    const childPath = [...path, k];
    if (v === null) {
      delete out[k];
      continue;
    }
    const cur = out[k];
    if (isObject(v)) {
      const merged = mergeMap(isObject(cur) ? cur : {}, v, childPath, lookup);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
    } else if (Array.isArray(v)) {
      out[k] = mergeList(Array.isArray(cur) ? cur : [], v, childPath, lookup, Array.isArray(cur));
    } else {
      out[k] = v;
    }
  }
  for (const [field, order] of Object.entries(orders)) {
    const cur = out[field];
    if (Array.isArray(cur))
      out[field] = applyOrder(
        cur,
        order,
        Array.isArray(original[field]) ? (original[field] as unknown[]) : [],
        lookup([...path, field]),
      );
  }
  return out;
}

function keyOf(item: unknown, mergeKey: string | undefined): unknown {
  if (mergeKey === undefined) return item;
  return isObject(item) ? item[mergeKey] : undefined;
}

function mergeList(
  original: unknown[],
  patch: unknown[],
  path: string[],
  lookup: Lookup,
  hadOriginal: boolean,
): unknown[] {
  const strategy = lookup(path);
  const replaceItem = patch.find((p) => isObject(p) && p[directive] === "replace");
  if (replaceItem !== undefined) return stripDirectives(patch.filter((p) => p !== replaceItem)) as unknown[];
  if (!strategy.merge || !hadOriginal) {
    if (strategy.merge) return mergeList([], patch, path, lookup, true);
    return clone(patch);
  }
  const mergeKey = strategy.mergeKey;
  if (mergeKey === undefined) {
    // primitive list with merge strategy: union, new items appended in patch order
    const out = clone(original);
    for (const p of patch) if (!out.some((o) => deepEqual(o, p))) out.push(clone(p));
    return out;
  }
  let out = clone(original);
  for (const p of patch) {
    if (!isObject(p))
      throw badRequest(
        `merging an object in a list needs the merge key ${JSON.stringify(mergeKey)}: ${JSON.stringify(p)}`,
      );
    const key = p[mergeKey];
    if (key === undefined)
      throw badRequest(`map: ${JSON.stringify(p)} does not contain declared merge key: ${mergeKey}`);
    if (p[directive] === "delete") {
      out = out.filter((o) => !deepEqual(keyOf(o, mergeKey), key));
      continue;
    }
    const i = out.findIndex((o) => deepEqual(keyOf(o, mergeKey), key));
    if (i >= 0) {
      const cur = out[i];
      const merged = mergeMap(isObject(cur) ? cur : {}, p, path, lookup);
      if (merged === undefined) out.splice(i, 1);
      else out[i] = merged;
    } else {
      const added = mergeMap({}, p, path, lookup);
      if (added !== undefined) out.push(added);
    }
  }
  return out;
}

/** $setElementOrder: strategicpatch normalizeElementOrder + mergeSortedSlice. */
function applyOrder(merged: unknown[], order: unknown[], serverOrder: unknown[], strategy: ListStrategy): unknown[] {
  const mergeKey = strategy.merge ? strategy.mergeKey : undefined;
  const orderKey = (o: unknown): unknown => (mergeKey !== undefined && isObject(o) ? o[mergeKey] : o);
  const indexIn = (list: unknown[], item: unknown): number =>
    list.findIndex((x) => deepEqual(orderKey(x), keyOf(item, mergeKey)));
  const inPatch = merged.filter((m) => indexIn(order, m) >= 0).sort((a, b) => indexIn(order, a) - indexIn(order, b));
  const serverOnly = merged.filter((m) => indexIn(order, m) < 0);
  const out: unknown[] = [];
  let i = 0;
  let j = 0;
  while (i < serverOnly.length || j < inPatch.length) {
    if (i >= serverOnly.length) out.push(inPatch[j++]);
    else if (j >= inPatch.length) out.push(serverOnly[i++]);
    else {
      const li = indexIn(serverOrder, serverOnly[i]);
      const ri = indexIn(serverOrder, inPatch[j]);
      if (li >= 0 && ri >= 0 && li < ri) out.push(serverOnly[i++]);
      else out.push(inPatch[j++]);
    }
  }
  return out;
}

/**
 * Applies a strategic merge patch to a copy of target. kindKey ("v1/ServiceAccount",
 * "coordination.k8s.io/v1/Lease") selects the list strategies; unknown kinds get atomic lists
 * except the metadata lists every object shares.
 */
export function applyStrategicMergePatch(target: unknown, patch: unknown, kindKey: string): unknown {
  if (!isObject(patch)) throw badRequest("the body of a strategic merge patch must be a JSON object");
  const lookup: Lookup = (path) => listStrategy(kindKey, path);
  try {
    const out = mergeMap(isObject(target) ? target : {}, patch, [], lookup);
    return out ?? {};
  } catch (err) {
    if (err instanceof PatchError) throw err;
    throw badRequest(`unable to apply strategic merge patch: ${(err as Error).message}`);
  }
}
