// JSON patch (RFC 6902) like evanphx/json-patch as used by kube-apiserver: a patch document that is
// not a list is a 400; an operation that does not apply (missing path, failed test, unknown op) is the
// generic 422 kube-apiserver answers (NewGenericServerResponse: "the server rejected our request due
// to an error in our request", no causes); the detail is kept as the error's `cause`. Missing parents
// are never created (a fabric8-style leniency that hides operator bugs).
import { PatchError, badRequest } from "./errors.ts";
import { clone, deepEqual, isObject } from "./json.ts";

interface Op {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
  hasValue: boolean;
}

/** An operation that does not apply; turned into kube's generic 422 by applyJsonPatch. */
class NotApplicable extends Error {}
const notApplicable = (message: string): NotApplicable => new NotApplicable(message);

function parseOps(ops: unknown[]): Op[] {
  return ops.map((raw) => {
    if (!isObject(raw)) throw notApplicable("invalid operation");
    const op = raw["op"];
    const path = raw["path"];
    if (typeof op !== "string") throw notApplicable("Unexpected kind: unknown");
    if (typeof path !== "string") throw notApplicable(`${op} operation missing path field`);
    const out: Op = { op, path, hasValue: Object.hasOwn(raw, "value"), value: raw["value"] };
    if (typeof raw["from"] === "string") out.from = raw["from"];
    return out;
  });
}

function splitPointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw notApplicable(`invalid JSON pointer: ${JSON.stringify(path)}`);
  return path
    .slice(1)
    .split("/")
    .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
}

type Container = Record<string, unknown> | unknown[];

/** Resolves the parent container of `path`; throws when a parent is missing. */
function parentOf(doc: unknown, parts: string[], op: string, path: string): { parent: Container; key: string } {
  let cur: unknown = doc;
  for (const p of parts.slice(0, -1)) {
    if (Array.isArray(cur)) {
      const i = /^\d+$/.test(p) ? Number(p) : NaN;
      cur = Number.isInteger(i) && i < cur.length ? cur[i] : undefined;
    } else if (isObject(cur)) cur = Object.hasOwn(cur, p) ? cur[p] : undefined;
    else cur = undefined;
    if (cur === undefined)
      throw notApplicable(
        `${op} operation does not apply: doc is missing path: ${JSON.stringify(path)}: missing value`,
      );
  }
  if (!Array.isArray(cur) && !isObject(cur))
    throw notApplicable(`${op} operation does not apply: doc is missing path: ${JSON.stringify(path)}: missing value`);
  return { parent: cur, key: parts[parts.length - 1] ?? "" };
}

function arrayIndex(arr: unknown[], key: string, allowEnd: boolean, op: string, path: string): number {
  if (key === "-" && allowEnd) return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(key))
    throw notApplicable(
      `${op} operation does not apply: invalid array index ${JSON.stringify(key)} in ${JSON.stringify(path)}`,
    );
  const i = Number(key);
  if (i > arr.length || (!allowEnd && i === arr.length))
    throw notApplicable(`${op} operation does not apply: index out of bounds: ${i} in ${JSON.stringify(path)}`);
  return i;
}

function getValue(doc: unknown, path: string, op: string): unknown {
  const parts = splitPointer(path);
  if (parts.length === 0) return doc;
  const { parent, key } = parentOf(doc, parts, op, path);
  if (Array.isArray(parent)) return parent[arrayIndex(parent, key, false, op, path)];
  if (!Object.hasOwn(parent, key))
    throw notApplicable(`${op} operation does not apply: doc is missing key: ${path}: missing value`);
  return parent[key];
}

function addValue(doc: unknown, path: string, value: unknown, op: string): unknown {
  const parts = splitPointer(path);
  if (parts.length === 0) return value;
  const { parent, key } = parentOf(doc, parts, op, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, true, op, path), 0, value);
  else parent[key] = value;
  return doc;
}

function removeValue(doc: unknown, path: string, op: string): unknown {
  const parts = splitPointer(path);
  if (parts.length === 0) throw notApplicable(`${op} operation does not apply: cannot remove the document root`);
  const { parent, key } = parentOf(doc, parts, op, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, false, op, path), 1);
  else {
    if (!Object.hasOwn(parent, key))
      throw notApplicable(
        `${op} operation does not apply: doc is missing path: ${JSON.stringify(path)}: missing value`,
      );
    delete parent[key];
  }
  return doc;
}

/** Applies an RFC 6902 operation list to a copy of target. */
export function applyJsonPatch(target: unknown, ops: unknown): unknown {
  // decoding: the body must be a list of objects (else 400, as json.Unmarshal into jsonpatch.Patch fails)
  if (!Array.isArray(ops)) throw badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  if (!ops.every(isObject)) throw badRequest("json: cannot unmarshal into Go value of type jsonpatch.Operation");
  try {
    return applyOps(clone(target), parseOps(ops));
  } catch (err) {
    if (!(err instanceof NotApplicable)) throw err;
    throw new PatchError(422, "Invalid", "the server rejected our request due to an error in our request", {
      cause: err,
    });
  }
}

function applyOps(start: unknown, ops: Op[]): unknown {
  let doc = start;
  for (const o of ops) {
    switch (o.op) {
      case "add":
        if (!o.hasValue) throw notApplicable("add operation missing value");
        doc = addValue(doc, o.path, clone(o.value), "add");
        break;
      case "remove":
        doc = removeValue(doc, o.path, "remove");
        break;
      case "replace":
        if (!o.hasValue) throw notApplicable("replace operation missing value");
        getValue(doc, o.path, "replace");
        if (splitPointer(o.path).length === 0) doc = clone(o.value);
        else {
          const { parent, key } = parentOf(doc, splitPointer(o.path), "replace", o.path);
          if (Array.isArray(parent)) parent[arrayIndex(parent, key, false, "replace", o.path)] = clone(o.value);
          else parent[key] = clone(o.value);
        }
        break;
      case "move": {
        if (o.from === undefined) throw notApplicable("move operation missing from");
        if (o.path.startsWith(`${o.from}/`))
          throw notApplicable(`move operation does not apply: cannot move ${o.from} into its own child ${o.path}`);
        const v = getValue(doc, o.from, "move");
        doc = removeValue(doc, o.from, "move");
        doc = addValue(doc, o.path, v, "move");
        break;
      }
      case "copy": {
        if (o.from === undefined) throw notApplicable("copy operation missing from");
        doc = addValue(doc, o.path, clone(getValue(doc, o.from, "copy")), "copy");
        break;
      }
      case "test": {
        let actual: unknown;
        try {
          actual = getValue(doc, o.path, "test");
        } catch {
          throw notApplicable(`testing value ${o.path} failed: test failed`);
        }
        if (!deepEqual(actual, o.value)) throw notApplicable(`testing value ${o.path} failed: test failed`);
        break;
      }
      default:
        throw notApplicable(`Unexpected kind: ${o.op}`);
    }
  }
  return doc;
}
