import type { z } from "zod";

// Read leniently, write strictly. The spec is the user's and stays strict (the CRD refuses what the schema does not
// know). Status is written by operators, and after a rollback the one reading it may be older than the one that
// wrote it: a field, a condition or an enum value this version has never heard of is a newer version's, not an
// error. So a status the schema refuses is read without the parts it cannot read:
//   - a field of an object: left out of what this version sees (the status writes are merge patches computed against
//     what it saw, so the field stays on the server untouched);
//   - anything inside a list (a list is written whole, so leaving an element out would drop it on the next write):
//     the list is kept as it was read, unvalidated; the code that reads it ignores what it does not know.
// Condition types are open already in the schema (src/resources/conditions.ts), so a newer version's conditions
// survive every status write.

type Path = readonly PropertyKey[];

type Json = Record<PropertyKey, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null;

/** The part of `path` that leads to its first list, or the whole path when it crosses none. */
function upToFirstList(root: unknown, path: Path): { path: Path; list: boolean } {
  let node = root;
  for (let i = 0; i < path.length; i++) {
    if (Array.isArray(node)) return { path: path.slice(0, i), list: true };
    if (!isObject(node)) return { path: path.slice(0, i + 1), list: false };
    node = node[path[i] as PropertyKey];
  }
  return { path, list: Array.isArray(node) };
}

function at(root: unknown, path: Path): unknown {
  let node = root;
  for (const key of path) node = isObject(node) ? node[key as PropertyKey] : undefined;
  return node;
}

function remove(root: unknown, path: Path): boolean {
  const parent = at(root, path.slice(0, -1));
  const key = path.at(-1);
  if (!isObject(parent) || key === undefined || !(key in parent)) return false;
  delete parent[key as PropertyKey];
  return true;
}

function put(root: unknown, path: Path, value: unknown): void {
  const parent = at(root, path.slice(0, -1));
  const key = path.at(-1);
  if (isObject(parent) && key !== undefined) parent[key as PropertyKey] = value;
}

/**
 * `raw` parsed with `schema`, status read leniently (see above). Undefined when something outside status is wrong,
 * or status cannot be read even so: the caller reports the strict parse's error.
 */
export function parseLeniently<T>(
  schema: z.ZodType<T>,
  raw: unknown,
  issues: readonly { path: Path }[],
): T | undefined {
  if (issues.some((i) => i.path[0] !== "status") || !isObject(raw)) return undefined;
  const copy = structuredClone(raw) as Json;
  const lists: Path[] = [];
  let current = issues;
  // Each round removes at least one path, and zod may report a nested issue only once its parent parses: bounded.
  for (let round = 0; round < 32; round++) {
    let removedAny = false;
    for (const issue of current) {
      let removed = false;
      const target = upToFirstList(copy, issue.path);
      if (target.path.length < 2) return undefined; // status itself is unreadable
      if (target.list && !lists.some((p) => p.join("\0") === target.path.join("\0"))) lists.push(target.path);
      // A required field already left out: its object goes instead (a status.source without its type is unreadable).
      for (let path = target.path; path.length >= 2 && !removed; path = path.slice(0, -1)) removed = remove(copy, path);
      removedAny ||= removed;
    }
    const result = schema.safeParse(copy);
    if (result.success) {
      const data = result.data as unknown;
      for (const path of lists) put(data, path, structuredClone(at(raw, path)));
      return data as T;
    }
    if (!removedAny || result.error.issues.some((i) => i.path[0] !== "status")) return undefined;
    current = result.error.issues;
  }
  return undefined;
}
