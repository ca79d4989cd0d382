// Shared shapes for devkube: objects are plain JSON trees, as on the wire.
export type Obj = Record<string, unknown>;

export function isObj(value: unknown): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function metaOf(obj: Obj): Obj {
  const meta = obj["metadata"];
  if (isObj(meta)) return meta;
  const created: Obj = {};
  obj["metadata"] = created;
  return created;
}

export function str(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

export function clone<T>(value: T): T {
  return structuredClone(value);
}

/** Deep equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => jsonEqual(v, b[i]));
  }
  if (isObj(a)) {
    if (!isObj(b)) return false;
    const ak = Object.keys(a).filter((k) => a[k] !== undefined);
    const bk = Object.keys(b).filter((k) => b[k] !== undefined);
    if (ak.length !== bk.length) return false;
    return ak.every((k) => jsonEqual(a[k], b[k]));
  }
  return false;
}

/** metav1.Time: RFC 3339 with whole seconds, like the real server emits. */
export function timeNow(date = new Date()): string {
  return date.toISOString().replace(/\.\d+Z$/, "Z");
}
