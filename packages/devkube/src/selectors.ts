import { badRequest } from "./errors.ts";
import type { ResourceType } from "./resource-type.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

type Requirement =
  | { op: "=" | "!="; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "!exists"; key: string };

export type Selector = (obj: Obj) => boolean;

/** Label selector grammar of apimachinery: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. */
export function parseLabelSelector(text: string | undefined): Selector | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const reqs: Requirement[] = [];
  for (const part of splitTop(text)) {
    const p = part.trim();
    if (!p) throw badRequest(`unable to parse requirement: found '', expected: identifier`);
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(p))) {
      reqs.push({
        op: m[2] as "in" | "notin",
        key: checkKey(m[1] as string),
        values: (m[3] as string).split(",").map((v) => checkValue(v.trim())),
      });
    } else if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(p))) {
      reqs.push({ op: m[2] === "!=" ? "!=" : "=", key: checkKey(m[1] as string), value: checkValue(m[3] as string) });
    } else if ((m = /^!\s*([\w./-]+)$/.exec(p))) {
      reqs.push({ op: "!exists", key: checkKey(m[1] as string) });
    } else if ((m = /^([\w./-]+)$/.exec(p))) {
      reqs.push({ op: "exists", key: checkKey(m[1] as string) });
    } else {
      throw badRequest(`unable to parse requirement: <nil>: Invalid value: "${p}": found unexpected token`);
    }
  }
  return (obj) => {
    const labels = isObj(metaOf(obj)["labels"]) ? (metaOf(obj)["labels"] as Obj) : {};
    return reqs.every((r) => {
      const has = Object.hasOwn(labels, r.key);
      const v = has ? String(labels[r.key]) : undefined;
      switch (r.op) {
        case "=":
          return v === r.value;
        case "!=":
          return v !== r.value;
        case "in":
          return v !== undefined && r.values.includes(v);
        case "notin":
          return v === undefined || !r.values.includes(v);
        case "exists":
          return has;
        default:
          return !has;
      }
    });
  };
}

function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  parts.push(cur);
  return parts;
}

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
function checkKey(k: string): string {
  if (!KEY.test(k))
    throw badRequest(
      `unable to parse requirement: values[0][${k}]: Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
    );
  return k;
}
function checkValue(v: string): string {
  if (!VALUE.test(v) || v.length > 63)
    throw badRequest(
      `unable to parse requirement: values[0][]: Invalid value: "${v}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
    );
  return v;
}

/** Field selectors: `=`, `==`, `!=` on metadata.name / metadata.namespace plus each kind's own fields. */
export function parseFieldSelector(text: string | undefined, rt: ResourceType): Selector | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const reqs: { key: string; value: string; negate: boolean }[] = [];
  for (const part of text.split(",")) {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${text}'; can't understand '${part}'`);
    const key = m[1] as string;
    const supported =
      key === "metadata.name" || key === "metadata.namespace" || (rt.fieldSelectorKeys ?? []).includes(key);
    if (!supported) throw badRequest(`field label not supported: ${key}`);
    reqs.push({ key, value: m[3] as string, negate: m[2] === "!=" });
  }
  return (obj) =>
    reqs.every((r) => {
      let v: string | undefined;
      if (r.key === "metadata.name") v = String(metaOf(obj)["name"] ?? "");
      else if (r.key === "metadata.namespace") v = String(metaOf(obj)["namespace"] ?? "");
      else v = rt.fieldSelector?.(obj, r.key) ?? "";
      return r.negate ? v !== r.value : v === r.value;
    });
}
