import { isObj } from "./types.ts";

/**
 * The subset of Kubernetes JSONPath that printer columns use: `.a.b`, `['a.b']`, `[0]`, `[*]`,
 * `[?(@.type=="Ready")]`, optionally wrapped in `{…}`. Returns every match.
 */
export function evaluateJsonPath(expr: string, root: unknown): unknown[] {
  let path = expr.trim();
  if (path.startsWith("{") && path.endsWith("}")) path = path.slice(1, -1);
  if (path.startsWith("$")) path = path.slice(1);
  let current: unknown[] = [root];
  let i = 0;
  while (i < path.length && current.length > 0) {
    const c = path[i];
    if (c === ".") {
      i++;
      let j = i;
      while (j < path.length && path[j] !== "." && path[j] !== "[") j++;
      const key = path.slice(i, j);
      i = j;
      if (key === "") continue;
      if (key === "*") current = current.flatMap((v) => (isObj(v) ? Object.values(v) : Array.isArray(v) ? v : []));
      else current = current.flatMap((v) => (isObj(v) && key in v ? [v[key]] : []));
    } else if (c === "[") {
      const end = findClose(path, i);
      const inner = path.slice(i + 1, end).trim();
      i = end + 1;
      current = current.flatMap((v) => indexInto(v, inner));
    } else {
      // bare leading key without a dot
      let j = i;
      while (j < path.length && path[j] !== "." && path[j] !== "[") j++;
      const key = path.slice(i, j);
      i = j;
      current = current.flatMap((v) => (isObj(v) && key in v ? [v[key]] : []));
    }
  }
  return current;
}

function findClose(path: string, open: number): number {
  let depth = 0;
  let quote: string | undefined;
  for (let k = open; k < path.length; k++) {
    const ch = path[k];
    if (quote) {
      if (ch === quote) quote = undefined;
      continue;
    }
    if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "[") depth++;
    else if (ch === "]") {
      depth--;
      if (depth === 0) return k;
    }
  }
  return path.length;
}

function indexInto(v: unknown, inner: string): unknown[] {
  if (inner === "*") return Array.isArray(v) ? v : isObj(v) ? Object.values(v) : [];
  const quoted = /^['"](.*)['"]$/.exec(inner);
  if (quoted) return isObj(v) && (quoted[1] as string) in v ? [v[quoted[1] as string]] : [];
  if (/^-?\d+$/.test(inner)) {
    if (!Array.isArray(v)) return [];
    const n = Number(inner);
    const idx = n < 0 ? v.length + n : n;
    return idx >= 0 && idx < v.length ? [v[idx]] : [];
  }
  const slice = /^(-?\d*):(-?\d*)$/.exec(inner);
  if (slice) {
    if (!Array.isArray(v)) return [];
    const s = slice[1] ? Number(slice[1]) : 0;
    const e = slice[2] ? Number(slice[2]) : v.length;
    return v.slice(s, e);
  }
  const filter = /^\?\((.*)\)$/.exec(inner);
  if (filter) {
    const items = Array.isArray(v) ? v : isObj(v) ? Object.values(v) : [];
    return items.filter((item) => matchesFilter(item, (filter[1] as string).trim()));
  }
  return [];
}

function matchesFilter(item: unknown, cond: string): boolean {
  const m = /^@((?:\.[\w-]+)+)\s*(==|!=|<=|>=|<|>)\s*(.+)$/.exec(cond);
  if (!m) {
    const exists = /^@((?:\.[\w-]+)+)$/.exec(cond);
    if (exists) return evaluateJsonPath(exists[1] as string, item).length > 0;
    return false;
  }
  const left = evaluateJsonPath(m[1] as string, item)[0];
  const raw = (m[3] as string).trim();
  const right: unknown = /^['"].*['"]$/.test(raw)
    ? raw.slice(1, -1)
    : raw === "true"
      ? true
      : raw === "false"
        ? false
        : Number(raw);
  switch (m[2]) {
    case "==":
      return left === right || String(left) === String(right);
    case "!=":
      return !(left === right || String(left) === String(right));
    case "<":
      return Number(left) < Number(right);
    case ">":
      return Number(left) > Number(right);
    case "<=":
      return Number(left) <= Number(right);
    default:
      return Number(left) >= Number(right);
  }
}
