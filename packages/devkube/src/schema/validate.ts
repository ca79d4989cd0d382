// Value validation of a custom resource against its structural schema, worded like kube-openapi's
// validator as converted by apiextensions ValidateCustomResource, followed by list-type checks and
// x-kubernetes-validations (CEL). With an old object, unchanged values are ratcheted (errors on values
// equal to their correlated old value are dropped; CRDValidationRatcheting is on by default since 1.30).
import type { FieldError } from "./errors.ts";
import { duplicate, forbidden, invalid, notSupported, required, tooLong, tooMany, typeInvalid } from "./errors.ts";
import type { JsonObject, Node } from "./types.ts";
import { deepEqual, isObject } from "./types.ts";
import { checkFormat } from "./formats.ts";
import type { CompiledRule } from "./structural.ts";
import { parseFieldPath } from "./structural.ts";
import { toCel } from "./cel.ts";
import { Optional } from "@marcbachmann/cel-js";

/** the correlated old value, when there is one */
type Old = { value: unknown } | undefined;

interface Ctx {
  schema: FieldError[];
  listType: FieldError[];
  cel: FieldError[];
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  if (typeof v === "object") return "object";
  return typeof v; // string, boolean
}

const inBody = (path: string): string => `${path} in body`;

/** Validates one value; returns false when its type is wrong (children and rules are then skipped). */
function checkScalar(value: unknown, node: Node, path: string, out: FieldError[]): boolean {
  const actual = jsonType(value);
  if (value === null) {
    if (node.nullable || (node.type === undefined && !node.intOrString)) return true;
    const want = node.intOrString ? "integer,string" : (node.type ?? "");
    out.push(typeInvalid(path, "null", `${inBody(path)} must be of type ${want}: "null"`));
    return false;
  }
  if (node.intOrString) {
    if (actual !== "integer" && actual !== "string") {
      out.push(typeInvalid(path, actual, `${inBody(path)} must be of type integer,string: ${JSON.stringify(actual)}`));
      return false;
    }
  } else if (node.type !== undefined) {
    const ok = node.type === actual || (node.type === "number" && actual === "integer");
    if (!ok) {
      out.push(typeInvalid(path, actual, `${inBody(path)} must be of type ${node.type}: ${JSON.stringify(actual)}`));
      return false;
    }
  }
  if (typeof value === "string" && node.format !== undefined && !checkFormat(node.format, value)) {
    out.push(typeInvalid(path, value, `${inBody(path)} must be of type ${node.format}: ${JSON.stringify(value)}`));
  }
  if (node.enum !== undefined && !node.enum.some((e) => deepEqual(e, value))) {
    out.push(
      notSupported(
        path,
        value,
        node.enum.map((e) => (typeof e === "string" ? e : JSON.stringify(e))),
      ),
    );
  }
  if (typeof value === "string") {
    const len = [...value].length;
    if (node.maxLength !== undefined && len > node.maxLength) out.push(tooLong(path, value, node.maxLength));
    if (node.minLength !== undefined && len < node.minLength)
      out.push(invalid(path, value, `${inBody(path)} should be at least ${node.minLength} chars long`));
    if (node.pattern !== undefined && !node.pattern.test(value))
      out.push(invalid(path, value, `${inBody(path)} should match '${node.patternSource ?? ""}'`));
  }
  if (typeof value === "number") {
    if (node.maximum !== undefined) {
      if (node.exclusiveMaximum ? value >= node.maximum : value > node.maximum) {
        out.push(
          invalid(
            path,
            value,
            `${inBody(path)} should be less than ${node.exclusiveMaximum ? "" : "or equal to "}${node.maximum}`,
          ),
        );
      }
    }
    if (node.minimum !== undefined) {
      if (node.exclusiveMinimum ? value <= node.minimum : value < node.minimum) {
        out.push(
          invalid(
            path,
            value,
            `${inBody(path)} should be greater than ${node.exclusiveMinimum ? "" : "or equal to "}${node.minimum}`,
          ),
        );
      }
    }
    if (node.multipleOf !== undefined && node.multipleOf !== 0) {
      const q = value / node.multipleOf;
      if (Math.abs(q - Math.round(q)) > 1e-9)
        out.push(invalid(path, value, `${inBody(path)} should be a multiple of ${node.multipleOf}`));
    }
  }
  if (Array.isArray(value)) {
    if (node.minItems !== undefined && value.length < node.minItems)
      out.push(invalid(path, value.length, `${inBody(path)} should have at least ${node.minItems} items`));
    if (node.maxItems !== undefined && value.length > node.maxItems)
      out.push(tooMany(path, value.length, node.maxItems));
  }
  if (isObject(value)) {
    const n = Object.keys(value).length;
    if (node.minProperties !== undefined && n < node.minProperties)
      out.push(invalid(path, n, `${inBody(path)} should have at least ${node.minProperties} properties`));
    if (node.maxProperties !== undefined && n > node.maxProperties) out.push(tooMany(path, n, node.maxProperties));
    for (const r of node.required ?? []) {
      if (!Object.hasOwn(value, r)) out.push(required(path === "" ? r : `${path}.${r}`));
    }
  }
  checkJunctors(value, node, path, out);
  return true;
}

function passes(value: unknown, node: Node, path: string): boolean {
  const errs: FieldError[] = [];
  validateSchemaOnly(value, node, path, errs);
  return errs.length === 0;
}

function checkJunctors(value: unknown, node: Node, path: string, out: FieldError[]): void {
  for (const sub of node.allOf) validateSchemaOnly(value, sub, path, out);
  if (node.anyOf.length > 0 && !node.anyOf.some((s) => passes(value, s, path))) {
    out.push(invalid(path, value, `${inBody(path)} must validate at least one schema (anyOf)`));
  }
  if (node.oneOf.length > 0 && node.oneOf.filter((s) => passes(value, s, path)).length !== 1) {
    out.push(invalid(path, value, `${inBody(path)} must validate one and only one schema (oneOf)`));
  }
  if (node.not !== undefined && passes(value, node.not, path)) {
    out.push(invalid(path, value, `${inBody(path)} must not validate the schema (not)`));
  }
}

/** Schema checks only (junctor sub-schemas): no list-type checks, no CEL. */
function validateSchemaOnly(value: unknown, node: Node, path: string, out: FieldError[]): void {
  if (!checkScalar(value, node, path, out)) return;
  if (Array.isArray(value) && node.items !== undefined)
    value.forEach((v, i) => node.items && validateSchemaOnly(v, node.items, `${path}[${i}]`, out));
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const prop = node.properties?.[k] ?? (node.additionalProperties !== true ? node.additionalProperties : undefined);
      if (prop !== undefined) validateSchemaOnly(v, prop, path === "" ? k : `${path}.${k}`, out);
    }
  }
}

function mapKeyOf(item: unknown, keys: string[]): Record<string, unknown> | undefined {
  if (!isObject(item)) return undefined;
  const out: Record<string, unknown> = {};
  for (const k of keys) if (Object.hasOwn(item, k)) out[k] = item[k];
  return out;
}

function checkListType(value: unknown[], node: Node, path: string, out: FieldError[]): void {
  if (node.listType === "set") {
    value.forEach((item, i) => {
      if (value.slice(0, i).some((prev) => deepEqual(prev, item))) out.push(duplicate(`${path}[${i}]`, item));
    });
  } else if (node.listType === "map" && node.listMapKeys !== undefined) {
    const keys = node.listMapKeys;
    const seen: Record<string, unknown>[] = [];
    value.forEach((item, i) => {
      const key = mapKeyOf(item, keys);
      if (key === undefined) return;
      if (seen.some((s) => deepEqual(s, key))) out.push(duplicate(`${path}[${i}]`, key));
      seen.push(key);
    });
  }
}

function correlateItem(item: unknown, node: Node, old: Old): Old {
  if (old === undefined || !Array.isArray(old.value) || node.listType !== "map" || node.listMapKeys === undefined)
    return undefined;
  const key = mapKeyOf(item, node.listMapKeys);
  const match = old.value.find((o) => deepEqual(mapKeyOf(o, node.listMapKeys ?? []), key));
  return match === undefined ? undefined : { value: match };
}

/** apiVersion and kind of x-kubernetes-embedded-resource objects (customresource validateEmbeddedResource). */
function checkEmbedded(value: JsonObject, path: string, out: FieldError[]): void {
  const p = (k: string): string => (path === "" ? k : `${path}.${k}`);
  if (!Object.hasOwn(value, "apiVersion")) out.push(required(p("apiVersion"), "must not be empty"));
  if (!Object.hasOwn(value, "kind")) out.push(required(p("kind"), "must not be empty"));
  for (const k of ["apiVersion", "kind"]) {
    if (!Object.hasOwn(value, k)) continue;
    const v = value[k];
    if (typeof v !== "string") out.push(invalid(p(k), v, "must be a string"));
    else if (v === "") out.push(invalid(p(k), v, "must not be empty"));
  }
}

/**
 * Walks value and schema together. `path` is the schema-validation path (kube-openapi joins map keys
 * with "."), `celPath` the CEL path (field.Path: map keys as "[key]"). `inherited` is the ratcheting
 * state of the nearest correlatable ancestor, used where no old value can be correlated.
 */
function walk(
  value: unknown,
  node: Node,
  path: string,
  celPath: string,
  old: Old,
  ctx: Ctx,
  isRoot: boolean,
  inherited: boolean,
): void {
  const unchanged = old !== undefined ? deepEqual(value, old.value) : inherited;
  const schemaErrs: FieldError[] = [];
  const typeOk = checkScalar(value, node, path, schemaErrs);
  if (!unchanged) ctx.schema.push(...schemaErrs);
  if (Array.isArray(value)) {
    const listErrs: FieldError[] = [];
    checkListType(value, node, path, listErrs);
    if (!unchanged) ctx.listType.push(...listErrs);
  }
  if (!typeOk) return;
  if (node.embeddedResource && isObject(value) && !unchanged) checkEmbedded(value, path, ctx.listType);
  if (value !== null && node.rules.length > 0) evaluateRules(value, node, celPath, old, unchanged, ctx, isRoot);
  if (Array.isArray(value) && node.items !== undefined) {
    const items = node.items;
    value.forEach((item, i) =>
      walk(item, items, `${path}[${i}]`, `${celPath}[${i}]`, correlateItem(item, node, old), ctx, false, unchanged),
    );
  } else if (isObject(value)) {
    const oldObj = old !== undefined && isObject(old.value) ? old.value : undefined;
    for (const [k, v] of Object.entries(value)) {
      if (isRoot && (k === "apiVersion" || k === "kind")) continue;
      const prop = node.properties?.[k];
      const sub = prop ?? (node.additionalProperties !== true ? node.additionalProperties : undefined);
      if (sub === undefined) continue;
      const childOld: Old = oldObj !== undefined && Object.hasOwn(oldObj, k) ? { value: oldObj[k] } : undefined;
      const childPath = path === "" ? k : `${path}.${k}`;
      const childCel = prop !== undefined ? (celPath === "" ? k : `${celPath}.${k}`) : `${celPath}[${k}]`;
      walk(v, sub, childPath, childCel, childOld, ctx, false, unchanged);
    }
  }
}

function renderFieldPath(base: string, fieldPath: string): string {
  const parts = parseFieldPath(fieldPath) ?? [];
  let out = base;
  for (const p of parts) {
    if (p.startsWith("[")) out += p;
    else out = out === "" ? p : `${out}.${p}`;
  }
  return out;
}

/** cel-go's wording of runtime errors, as kube-apiserver embeds it. */
function runtimeErrorDetail(message: string, ruleText: string): string {
  const first = (message.split("\n")[0] ?? message).trim().replace(/^No such key/, "no such key");
  if (/^(no such overload|found no matching overload)/.test(first)) {
    return `'${first}': call arguments did not match a supported operator, function or macro signature for rule: ${ruleText}`;
  }
  return `${first} evaluating rule: ${ruleText}`;
}

function evaluateRules(
  value: unknown,
  node: Node,
  path: string,
  old: Old,
  unchanged: boolean,
  ctx: Ctx,
  isRoot: boolean,
): void {
  const typeName = node.type ?? "";
  let self: unknown;
  let oldSelf: unknown;
  for (const rule of node.rules as CompiledRule[]) {
    const transition = rule.program.usesOldSelf;
    if (transition && old === undefined && rule.optionalOldSelf !== true) continue;
    if (!transition && unchanged) continue; // ratcheting
    self ??= toCel(value, node, isRoot);
    if (old !== undefined) oldSelf ??= toCel(old.value, node, isRoot);
    // ruleErrorString: the message when there is one, else the rule
    const ruleText = rule.message !== undefined && rule.message !== "" ? rule.message.trim() : rule.rule.trim();
    let result: unknown;
    try {
      // optionalOldSelf rules see oldSelf as a CEL optional (none on create)
      const oldVar =
        rule.optionalOldSelf === true
          ? old === undefined
            ? Optional.none()
            : Optional.of(oldSelf)
          : old === undefined
            ? null
            : oldSelf;
      result = rule.program.evaluate({ self, oldSelf: oldVar });
    } catch (err) {
      ctx.cel.push(invalid(path, typeName, runtimeErrorDetail((err as Error).message, ruleText)));
      continue;
    }
    if (result === true) continue;
    if (result !== false) {
      ctx.cel.push(
        invalid(path, typeName, `no such overload: rule did not evaluate to a bool evaluating rule: ${ruleText}`),
      );
      continue;
    }
    const field = rule.fieldPath !== undefined ? renderFieldPath(path, rule.fieldPath) : path;
    let message =
      rule.message !== undefined && rule.message !== "" ? rule.message.trim() : `failed rule: ${rule.rule.trim()}`;
    if (rule.messageProgram !== undefined) {
      try {
        const m = rule.messageProgram.evaluate({ self, oldSelf: old === undefined ? null : oldSelf });
        if (typeof m === "string" && m.trim() !== "" && !m.trim().includes("\n")) message = m.trim();
      } catch {
        // kube falls back to the static message when messageExpression fails
      }
    }
    switch (rule.reason) {
      case "FieldValueForbidden":
        ctx.cel.push(forbidden(field, message));
        break;
      case "FieldValueRequired":
        ctx.cel.push(required(field, message));
        break;
      case "FieldValueDuplicate":
        ctx.cel.push(duplicate(field, typeName));
        break;
      default:
        ctx.cel.push(invalid(field, typeName, message));
    }
  }
}

/** Validates a (pruned, defaulted) object; with oldObj also transition rules and ratcheting. */
export function validateObject(obj: JsonObject, root: Node, oldObj?: JsonObject): FieldError[] {
  const ctx: Ctx = { schema: [], listType: [], cel: [] };
  walk(obj, root, "", "", oldObj === undefined ? undefined : { value: oldObj }, ctx, true, false);
  // kube-apiserver validates with a nil root path, which field.Path prints as "<nil>"
  return [...ctx.schema, ...ctx.listType, ...ctx.cel].map((e) => (e.field === "" ? { ...e, field: "<nil>" } : e));
}

/** Validates a schema default against its own node (CRD creation). */
export function validateDefault(value: unknown, node: Node, path: string): FieldError[] {
  const ctx: Ctx = { schema: [], listType: [], cel: [] };
  walk(value, node, path, path, undefined, ctx, false, false);
  return [...ctx.schema, ...ctx.listType, ...ctx.cel];
}
