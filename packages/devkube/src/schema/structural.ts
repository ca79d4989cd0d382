// Parses a CRD openAPIV3Schema into Nodes and checks that it is structural (apiextensions
// pkg/apiserver/schema: validateStructuralInvariants/Completeness) with compilable CEL rules.
// Error paths are relative to the openAPIV3Schema ("properties[spec].type"); the CRD handler
// prefixes "spec.versions[i].schema.openAPIV3Schema.".
import type { FieldError } from "./errors.ts";
import { GoLiteral, forbidden, invalid, notSupported, required } from "./errors.ts";
import type { CelRule, Node, SchemaType } from "./types.ts";
import { isObject } from "./types.ts";
import type { CelProgram } from "./cel.ts";
import { compileCel } from "./cel.ts";

const types: SchemaType[] = ["object", "array", "string", "integer", "number", "boolean"];
const forbiddenKeys = ["$ref", "$schema", "id", "patternProperties", "dependencies", "additionalItems", "definitions"];
const reasons = ["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"] as const;

export interface CompiledRule extends CelRule {
  program: CelProgram;
  messageProgram?: CelProgram;
}

/**
 * Kubernetes compiles patterns with Go's RE2, which lacks lookaround and backreferences; a JS-only
 * pattern must be rejected here as it would be on a real cluster.
 */
function re2Problem(pattern: string): string | undefined {
  const m = /\(\?<?[=!]|\\[1-9]|\\k</.exec(pattern);
  if (m === null) return undefined;
  const token = m[0];
  return token.startsWith("(")
    ? `error parsing regexp: invalid or unsupported Perl syntax: \`${token}\``
    : `error parsing regexp: invalid escape sequence: \`${token}\``;
}

const join = (path: string, part: string): string => (path === "" ? part : `${path}.${part}`);

function num(raw: Record<string, unknown>, key: string, path: string, errors: FieldError[]): number | undefined {
  const v = raw[key];
  if (v === undefined) return undefined;
  if (typeof v !== "number") {
    errors.push(invalid(join(path, key), v, "must be a number"));
    return undefined;
  }
  return v;
}

function bool(raw: Record<string, unknown>, key: string): boolean {
  return raw[key] === true;
}

function parseNode(
  raw: unknown,
  path: string,
  ctx: "root" | "property" | "items" | "additionalProperties" | "junctor",
  errors: FieldError[],
): Node {
  const node: Node = {
    nullable: false,
    hasDefault: false,
    exclusiveMaximum: false,
    exclusiveMinimum: false,
    uniqueItems: false,
    preserveUnknownFields: false,
    embeddedResource: false,
    intOrString: false,
    allOf: [],
    anyOf: [],
    oneOf: [],
    rules: [],
  };
  if (!isObject(raw)) {
    errors.push(invalid(path === "" ? "openAPIV3Schema" : path, raw, "must be an object"));
    return node;
  }
  for (const key of forbiddenKeys) {
    if (raw[key] !== undefined) errors.push(forbidden(join(path, key), `${key} is not supported`));
  }
  node.nullable = bool(raw, "nullable");
  node.preserveUnknownFields = bool(raw, "x-kubernetes-preserve-unknown-fields");
  if (raw["x-kubernetes-preserve-unknown-fields"] === false) {
    errors.push(invalid(join(path, "x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"));
  }
  node.embeddedResource = bool(raw, "x-kubernetes-embedded-resource");
  node.intOrString = bool(raw, "x-kubernetes-int-or-string");

  const type = raw["type"];
  if (type !== undefined) {
    if (typeof type === "string" && (types as string[]).includes(type)) node.type = type as SchemaType;
    else errors.push(notSupported(join(path, "type"), type, types));
  } else if (ctx !== "junctor" && !node.intOrString && !node.preserveUnknownFields) {
    const detail =
      ctx === "root"
        ? "must not be empty at the root"
        : ctx === "items"
          ? "must not be empty for specified array items"
          : "must not be empty for specified object fields";
    errors.push(required(join(path, "type"), detail));
  }
  if (ctx === "root" && node.type !== undefined && node.type !== "object") {
    errors.push(invalid(join(path, "type"), node.type, "must be object at the root"));
  }
  if (node.intOrString && node.type !== undefined) {
    errors.push(forbidden(join(path, "type"), "must be empty if x-kubernetes-int-or-string is true"));
  }
  if (node.embeddedResource && node.type !== "object") {
    errors.push(
      invalid(join(path, "type"), node.type ?? "", "must be object if x-kubernetes-embedded-resource is true"),
    );
  }

  const props = raw["properties"];
  if (props !== undefined) {
    if (!isObject(props)) errors.push(invalid(join(path, "properties"), props, "must be an object"));
    else {
      node.properties = {};
      for (const [name, sub] of Object.entries(props)) {
        node.properties[name] = parseNode(
          sub,
          join(path, `properties[${name}]`),
          ctx === "junctor" ? "junctor" : "property",
          errors,
        );
      }
      if (node.type !== undefined && node.type !== "object" && ctx !== "junctor") {
        errors.push(forbidden(join(path, "properties"), "must be empty for type other than object"));
      }
    }
  }
  const addl = raw["additionalProperties"];
  if (addl !== undefined) {
    if (addl === false)
      errors.push(forbidden(join(path, "additionalProperties"), "must not be used with additionalProperties: false"));
    else if (addl === true) node.additionalProperties = true;
    else
      node.additionalProperties = parseNode(
        addl,
        join(path, "additionalProperties"),
        ctx === "junctor" ? "junctor" : "additionalProperties",
        errors,
      );
    if (props !== undefined)
      errors.push(
        forbidden(join(path, "additionalProperties"), "additionalProperties and properties are mutual exclusive"),
      );
  }
  const items = raw["items"];
  if (items !== undefined) {
    if (Array.isArray(items))
      errors.push(forbidden(join(path, "items"), "items must be a schema object and not an array"));
    else node.items = parseNode(items, join(path, "items"), ctx === "junctor" ? "junctor" : "items", errors);
  } else if (node.type === "array" && ctx !== "junctor") {
    errors.push(required(join(path, "items"), "must be specified"));
  }

  if (Array.isArray(raw["required"])) node.required = raw["required"].filter((r): r is string => typeof r === "string");
  if (Array.isArray(raw["enum"])) node.enum = raw["enum"];
  if (typeof raw["format"] === "string") node.format = raw["format"];
  const max = num(raw, "maximum", path, errors);
  if (max !== undefined) node.maximum = max;
  const min = num(raw, "minimum", path, errors);
  if (min !== undefined) node.minimum = min;
  node.exclusiveMaximum = bool(raw, "exclusiveMaximum");
  node.exclusiveMinimum = bool(raw, "exclusiveMinimum");
  const mult = num(raw, "multipleOf", path, errors);
  if (mult !== undefined) node.multipleOf = mult;
  for (const key of ["maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties"] as const) {
    const v = num(raw, key, path, errors);
    if (v !== undefined) node[key] = v;
  }
  if (typeof raw["pattern"] === "string") {
    node.patternSource = raw["pattern"];
    const problem = re2Problem(raw["pattern"]);
    if (problem !== undefined) {
      errors.push(
        invalid(join(path, "pattern"), raw["pattern"], `must be a valid regular expression, but isn't: ${problem}`),
      );
    } else {
      try {
        node.pattern = new RegExp(raw["pattern"], "u");
      } catch (err) {
        errors.push(
          invalid(
            join(path, "pattern"),
            raw["pattern"],
            `must be a valid regular expression, but isn't: error parsing regexp: ${(err as Error).message}`,
          ),
        );
      }
    }
  }
  if (raw["uniqueItems"] === true) {
    errors.push(
      forbidden(
        join(path, "uniqueItems"),
        "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
      ),
    );
  }

  const listType = raw["x-kubernetes-list-type"];
  if (listType !== undefined) {
    if (listType === "atomic" || listType === "set" || listType === "map") node.listType = listType;
    else errors.push(notSupported(join(path, "x-kubernetes-list-type"), listType, ["atomic", "set", "map"]));
    if (node.type !== "array")
      errors.push(invalid(join(path, "type"), node.type ?? "", "must be array if x-kubernetes-list-type is specified"));
  }
  const keys = raw["x-kubernetes-list-map-keys"];
  if (keys !== undefined) {
    if (!Array.isArray(keys) || !keys.every((k) => typeof k === "string"))
      errors.push(invalid(join(path, "x-kubernetes-list-map-keys"), keys, "must be a list of strings"));
    else node.listMapKeys = keys;
    if (node.listType !== "map")
      errors.push(
        forbidden(
          join(path, "x-kubernetes-list-map-keys"),
          'must not be specified if x-kubernetes-list-type is not "map"',
        ),
      );
  }
  if (node.listType === "map") {
    if (node.listMapKeys === undefined || node.listMapKeys.length === 0) {
      errors.push(
        required(join(path, "x-kubernetes-list-map-keys"), 'must not be empty if x-kubernetes-list-type is "map"'),
      );
    } else if (node.items !== undefined) {
      if (node.items.type !== "object")
        errors.push(
          invalid(
            join(path, "items.type"),
            node.items.type ?? "",
            'must be object if parent array\'s x-kubernetes-list-type is "map"',
          ),
        );
      for (const [i, k] of node.listMapKeys.entries()) {
        const prop = node.items.properties?.[k];
        if (prop === undefined)
          errors.push(
            required(
              join(path, `items.properties[${k}]`),
              "entries for all x-kubernetes-list-map-keys must be specified",
            ),
          );
        else if (!(node.items.required ?? []).includes(k) && !prop.hasDefault) {
          errors.push(
            required(
              join(path, `items.properties[${k}]`),
              "all x-kubernetes-list-map-keys must be required or have a default value",
            ),
          );
        }
        void i;
      }
    }
  }
  const mapType = raw["x-kubernetes-map-type"];
  if (mapType === "atomic" || mapType === "granular") node.mapType = mapType;
  else if (mapType !== undefined)
    errors.push(notSupported(join(path, "x-kubernetes-map-type"), mapType, ["granular", "atomic"]));

  for (const j of ["allOf", "anyOf", "oneOf"] as const) {
    const list = raw[j];
    if (Array.isArray(list)) node[j] = list.map((s, i) => parseNode(s, join(path, `${j}[${i}]`), "junctor", errors));
  }
  if (raw["not"] !== undefined) node.not = parseNode(raw["not"], join(path, "not"), "junctor", errors);

  if (Object.hasOwn(raw, "default")) {
    node.hasDefault = true;
    node.default = raw["default"];
    if (ctx === "junctor")
      errors.push(forbidden(join(path, "default"), "must not be set inside allOf/anyOf/oneOf/not"));
  }

  const validations = raw["x-kubernetes-validations"];
  if (validations !== undefined) {
    if (!Array.isArray(validations))
      errors.push(invalid(join(path, "x-kubernetes-validations"), validations, "must be a list"));
    else pendingRules.push({ node, raw: validations, path, isRoot: ctx === "root" });
  }
  return node;
}

// Rules are compiled after the whole tree is parsed, so that they can be checked against it.
let pendingRules: { node: Node; raw: unknown[]; path: string; isRoot: boolean }[] = [];

/** The rule as kube-apiserver prints it in errors: the Go struct apiextensions.ValidationRule (%#v). */
function ruleLiteral(raw: Record<string, unknown>): GoLiteral {
  const str = (k: string): string => JSON.stringify(typeof raw[k] === "string" ? raw[k] : "");
  const ptr = (k: string, type: string): string =>
    raw[k] === undefined || raw[k] === null ? `(${type})(nil)` : `(${type})(0xc000a1e000)`;
  return new GoLiteral(
    `apiextensions.ValidationRule{Rule:${str("rule")}, Message:${str("message")}, MessageExpression:${str("messageExpression")}, ` +
      `Reason:${ptr("reason", "*apiextensions.FieldValueErrorReason")}, FieldPath:${str("fieldPath")}, OptionalOldSelf:${ptr("optionalOldSelf", "*bool")}}`,
  );
}

function parseRule(
  raw: unknown,
  path: string,
  errors: FieldError[],
  self: { node: Node; isRoot: boolean },
): CompiledRule[] {
  if (!isObject(raw) || typeof raw["rule"] !== "string") {
    errors.push(required(join(path, "rule"), ""));
    return [];
  }
  const rule = raw["rule"];
  let program: CelProgram;
  try {
    program = compileCel(rule, "bool", self, raw["optionalOldSelf"] === true);
  } catch (err) {
    errors.push(invalid(join(path, "rule"), ruleLiteral(raw), (err as Error).message));
    return [];
  }
  const out: CompiledRule = { rule, program };
  if (typeof raw["message"] === "string") {
    out.message = raw["message"];
    if (out.message.trim() === "")
      errors.push(invalid(join(path, "message"), out.message, "message must be non-empty if specified"));
    if (out.message.includes("\n"))
      errors.push(invalid(join(path, "message"), out.message, "message must not contain line breaks"));
  }
  if (typeof raw["messageExpression"] === "string") {
    out.messageExpression = raw["messageExpression"];
    try {
      out.messageProgram = compileCel(raw["messageExpression"], "string", self);
    } catch (err) {
      errors.push(
        invalid(join(path, "messageExpression"), ruleLiteral(raw), `messageExpression ${(err as Error).message}`),
      );
    }
  }
  const reason = raw["reason"];
  if (reason !== undefined) {
    if (typeof reason === "string" && (reasons as readonly string[]).includes(reason))
      out.reason = reason as (typeof reasons)[number];
    else errors.push(notSupported(join(path, "reason"), reason, [...reasons]));
  }
  if (typeof raw["fieldPath"] === "string") {
    out.fieldPath = raw["fieldPath"];
    if (parseFieldPath(out.fieldPath) === undefined)
      errors.push(invalid(join(path, "fieldPath"), out.fieldPath, "fieldPath must be a valid path"));
  }
  if (raw["optionalOldSelf"] === true) {
    out.optionalOldSelf = true;
    if (!program.usesOldSelf)
      errors.push(forbidden(join(path, "optionalOldSelf"), "may not be set if oldSelf is not used in rule"));
  }
  return [out];
}

/** ".spec.a['b.c'][0]" -> ["spec","a","b.c","[0]"] rendered later; undefined when malformed. */
export function parseFieldPath(fp: string): string[] | undefined {
  const parts: string[] = [];
  let i = 0;
  while (i < fp.length) {
    if (fp[i] === ".") {
      const m = /^\.([A-Za-z_][A-Za-z0-9_-]*)/.exec(fp.slice(i));
      if (m === null || m[1] === undefined) return undefined;
      parts.push(m[1]);
      i += m[0].length;
    } else if (fp[i] === "[") {
      const m = /^\['((?:[^'\\]|\\.)*)'\]|^\[(\d+)\]/.exec(fp.slice(i));
      if (m === null) return undefined;
      parts.push(m[1] !== undefined ? m[1] : `[${m[2]}]`);
      i += m[0].length;
    } else return undefined;
  }
  return parts;
}

function checkRootMetadata(root: Node, errors: FieldError[]): void {
  const meta = root.properties?.["metadata"];
  if (meta === undefined) return;
  for (const key of Object.keys(meta.properties ?? {})) {
    if (key !== "name" && key !== "generateName") {
      errors.push(forbidden(`properties[metadata].properties[${key}]`, "must not be specified"));
    }
  }
  if (meta.hasDefault) errors.push(forbidden("properties[metadata].default", "must not be specified"));
}

/** Parses and checks a schema; returns the root node and all problems found. */
export function parseStructural(raw: unknown): { root: Node; errors: FieldError[] } {
  const errors: FieldError[] = [];
  pendingRules = [];
  const root = parseNode(raw, "", "root", errors);
  for (const p of pendingRules) {
    p.node.rules = p.raw.flatMap((v, i) =>
      parseRule(v, join(p.path, `x-kubernetes-validations[${i}]`), errors, { node: p.node, isRoot: p.isRoot }),
    );
  }
  pendingRules = [];
  checkRootMetadata(root, errors);
  return { root, errors };
}
