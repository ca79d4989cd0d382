// The Kubernetes CEL libraries (k8s.io/apiserver/pkg/cel/library and the cel-go extensions Kubernetes
// enables) that @marcbachmann/cel-js does not ship: list helpers, regex find, string extras, sets,
// quantity and url. Namespaced functions (sets.contains) are receiver calls on a constant.
import type { Environment } from "@marcbachmann/cel-js";
import { isObject } from "./types.ts";

function compareCel(a: unknown, b: unknown): number {
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  if ((typeof a === "bigint" || typeof a === "number") && (typeof b === "bigint" || typeof b === "number"))
    return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  if (a instanceof Quantity && b instanceof Quantity) return a.compare(b);
  throw new Error("no such overload");
}

function celEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if ((typeof a === "bigint" || typeof a === "number") && (typeof b === "bigint" || typeof b === "number"))
    return Number(a) === Number(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => celEqual(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && celEqual(a[k], b[k]));
  }
  return false;
}

// --- quantity (k8s.io/apimachinery resource.Quantity, exact as a fraction) ----------------------

const quantityPattern = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;
const binary: Record<string, bigint> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};
const decimal: Record<string, number> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const maxInt64 = (1n << 63n) - 1n;
const minInt64 = -(1n << 63n);

class Quantity {
  readonly num: bigint;
  readonly den: bigint;
  constructor(num: bigint, den: bigint) {
    const g = gcd(num < 0n ? -num : num, den);
    this.num = g > 1n ? num / g : num;
    this.den = g > 1n ? den / g : den;
  }
  static parse(s: string): Quantity | undefined {
    const m = quantityPattern.exec(s);
    if (m === null || m[1] === undefined) return undefined;
    const [intPart = "", frac = ""] = m[1].replace(/^[+-]/, "").split(".");
    let num = BigInt((intPart || "0") + frac) * (m[1].startsWith("-") ? -1n : 1n);
    let den = 10n ** BigInt(frac.length);
    let exp = 0;
    if (m[2] !== undefined) exp = Number(m[2].slice(1));
    else if (m[3] !== undefined) {
      const b = binary[m[3]];
      if (b !== undefined) num *= b;
      else exp = decimal[m[3]] ?? 0;
    }
    if (exp >= 0) num *= 10n ** BigInt(exp);
    else den *= 10n ** BigInt(-exp);
    return new Quantity(num, den);
  }
  compare(o: Quantity): number {
    const l = this.num * o.den;
    const r = o.num * this.den;
    return l < r ? -1 : l > r ? 1 : 0;
  }
  add(o: Quantity): Quantity {
    return new Quantity(this.num * o.den + o.num * this.den, this.den * o.den);
  }
  isInteger(): boolean {
    return this.num % this.den === 0n && this.num / this.den <= maxInt64 && this.num / this.den >= minInt64;
  }
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

function quantityOf(s: string): Quantity {
  const q = Quantity.parse(s);
  if (q === undefined)
    throw new Error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
  return q;
}

// --- url (library.URLs: url.ParseRequestURI semantics: absolute URI or absolute path) ------------

class CelUrl {
  readonly url: URL;
  readonly pathOnly: boolean;
  constructor(url: URL, pathOnly: boolean) {
    this.url = url;
    this.pathOnly = pathOnly;
  }
}

function parseUrl(s: string): CelUrl | undefined {
  if (s.startsWith("/")) {
    try {
      return new CelUrl(new URL(s, "http://placeholder"), true);
    } catch {
      return undefined;
    }
  }
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:/.test(s)) return undefined;
  try {
    return new CelUrl(new URL(s), false);
  } catch {
    return undefined;
  }
}

function urlOf(s: string): CelUrl {
  const u = parseUrl(s);
  if (u === undefined)
    throw new Error(
      `URL parse error during conversion from string: parse ${JSON.stringify(s)}: invalid URI for request`,
    );
  return u;
}

class SetsLibrary {}

export function registerKubernetesLibraries(env: Environment): void {
  // lists (library/lists.go)
  env.registerFunction("list.isSorted(): bool", (l: unknown[]) =>
    l.every((v, i) => i === 0 || compareCel(l[i - 1], v) <= 0),
  );
  env.registerFunction("list.sum(): dyn", (l: unknown[]) => {
    if (l.length === 0) return 0n;
    if (l.every((v) => typeof v === "bigint")) return (l as bigint[]).reduce((a, b) => a + b, 0n);
    return l.reduce((a: number, b) => a + Number(b), 0);
  });
  const pick = (l: unknown[], sign: number): unknown => {
    if (l.length === 0) throw new Error("min called on empty list");
    return l.reduce((a, b) => (compareCel(b, a) * sign < 0 ? b : a));
  };
  env.registerFunction("list.min(): dyn", (l: unknown[]) => pick(l, 1));
  env.registerFunction("list.max(): dyn", (l: unknown[]) => pick(l, -1));
  env.registerFunction("list.indexOf(dyn): int", (l: unknown[], v: unknown) =>
    BigInt(l.findIndex((x) => celEqual(x, v))),
  );
  env.registerFunction("list.lastIndexOf(dyn): int", (l: unknown[], v: unknown) => {
    for (let i = l.length - 1; i >= 0; i--) if (celEqual(l[i], v)) return BigInt(i);
    return -1n;
  });

  // regex (library/regex.go) and cel-go ext strings
  env.registerFunction(
    "string.find(string): string",
    (s: string, re: string) => new RegExp(re, "u").exec(s)?.[0] ?? "",
  );
  env.registerFunction("string.findAll(string): list<string>", (s: string, re: string) =>
    [...s.matchAll(new RegExp(re, "gu"))].map((m) => m[0]),
  );
  env.registerFunction("string.findAll(string, int): list<string>", (s: string, re: string, n: bigint) => {
    const all = [...s.matchAll(new RegExp(re, "gu"))].map((m) => m[0]);
    return n < 0n ? all : all.slice(0, Number(n));
  });
  env.registerFunction("string.charAt(int): string", (s: string, i: bigint) => {
    const chars = [...s];
    if (i < 0n || i > BigInt(chars.length)) throw new Error(`index out of range: ${i}`);
    return chars[Number(i)] ?? "";
  });
  env.registerFunction("string.replace(string, string): string", (s: string, a: string, b: string) =>
    s.split(a).join(b),
  );
  env.registerFunction("string.replace(string, string, int): string", (s: string, a: string, b: string, n: bigint) => {
    const parts = s.split(a);
    if (n < 0n || Number(n) >= parts.length - 1) return parts.join(b);
    return parts.slice(0, Number(n) + 1).join(b) + a + parts.slice(Number(n) + 1).join(a);
  });
  env.registerFunction("string.reverse(): string", (s: string) => [...s].reverse().join(""));

  // sets (cel-go ext.Sets)
  env.registerType("SetsLibrary", SetsLibrary);
  env.registerConstant("sets", "SetsLibrary", new SetsLibrary());
  env.registerFunction("SetsLibrary.contains(list, list): bool", (_: SetsLibrary, a: unknown[], b: unknown[]) =>
    b.every((x) => a.some((y) => celEqual(x, y))),
  );
  env.registerFunction(
    "SetsLibrary.equivalent(list, list): bool",
    (_: SetsLibrary, a: unknown[], b: unknown[]) =>
      b.every((x) => a.some((y) => celEqual(x, y))) && a.every((x) => b.some((y) => celEqual(x, y))),
  );
  env.registerFunction("SetsLibrary.intersects(list, list): bool", (_: SetsLibrary, a: unknown[], b: unknown[]) =>
    b.some((x) => a.some((y) => celEqual(x, y))),
  );

  // quantity (library/quantity.go)
  env.registerType("Quantity", Quantity);
  env.registerFunction("quantity(string): Quantity", quantityOf);
  env.registerOperator("Quantity == Quantity", (a: Quantity, b: Quantity) => a.compare(b) === 0);
  env.registerFunction("isQuantity(string): bool", (s: string) => Quantity.parse(s) !== undefined);
  env.registerFunction("Quantity.isGreaterThan(Quantity): bool", (a: Quantity, b: Quantity) => a.compare(b) > 0);
  env.registerFunction("Quantity.isLessThan(Quantity): bool", (a: Quantity, b: Quantity) => a.compare(b) < 0);
  env.registerFunction("Quantity.compareTo(Quantity): int", (a: Quantity, b: Quantity) => BigInt(a.compare(b)));
  env.registerFunction("Quantity.add(Quantity): Quantity", (a: Quantity, b: Quantity) => a.add(b));
  env.registerFunction("Quantity.add(int): Quantity", (a: Quantity, b: bigint) => a.add(new Quantity(b, 1n)));
  env.registerFunction("Quantity.sub(Quantity): Quantity", (a: Quantity, b: Quantity) =>
    a.add(new Quantity(-b.num, b.den)),
  );
  env.registerFunction("Quantity.sub(int): Quantity", (a: Quantity, b: bigint) => a.add(new Quantity(-b, 1n)));
  env.registerFunction("Quantity.sign(): int", (a: Quantity) => (a.num > 0n ? 1n : a.num < 0n ? -1n : 0n));
  env.registerFunction("Quantity.isInteger(): bool", (a: Quantity) => a.isInteger());
  env.registerFunction("Quantity.asInteger(): int", (a: Quantity) => {
    if (!a.isInteger()) throw new Error("cannot convert value to integer");
    return a.num / a.den;
  });
  env.registerFunction("Quantity.asApproximateFloat(): double", (a: Quantity) => Number(a.num) / Number(a.den));

  // url (library/urls.go)
  env.registerType("URL", CelUrl);
  env.registerFunction("url(string): URL", urlOf);
  env.registerFunction("isURL(string): bool", (s: string) => parseUrl(s) !== undefined);
  env.registerFunction("URL.getScheme(): string", (u: CelUrl) => (u.pathOnly ? "" : u.url.protocol.replace(/:$/, "")));
  env.registerFunction("URL.getHost(): string", (u: CelUrl) => (u.pathOnly ? "" : u.url.host));
  env.registerFunction("URL.getHostname(): string", (u: CelUrl) =>
    u.pathOnly ? "" : u.url.hostname.replace(/^\[(.*)\]$/, "$1"),
  );
  env.registerFunction("URL.getPort(): string", (u: CelUrl) => (u.pathOnly ? "" : u.url.port));
  env.registerFunction("URL.getEscapedPath(): string", (u: CelUrl) => u.url.pathname);
  env.registerFunction("URL.getQuery(): map<string, list<string>>", (u: CelUrl) => {
    const out: Record<string, string[]> = {};
    for (const [k, v] of u.url.searchParams) (out[k] ??= []).push(v);
    return out;
  });
}
