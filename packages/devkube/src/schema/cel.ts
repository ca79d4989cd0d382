// CEL for x-kubernetes-validations on top of @marcbachmann/cel-js: `self`/`oldSelf` bindings, the
// Kubernetes CEL libraries the engine lacks (k8s-library.ts, ip-library.ts), a static check of field
// selections against the schema, and values typed from the schema (schema integers become CEL
// int = bigint, so `self.size + 1 == 4` works as on a real cluster).
import { Environment } from "@marcbachmann/cel-js";
import type { Node } from "./types.ts";
import { isObject } from "./types.ts";
import { registerKubernetesLibraries } from "./k8s-library.ts";
import { registerIpLibraries } from "./ip-library.ts";

export interface CelProgram {
  evaluate(vars: Record<string, unknown>): unknown;
  /** whether the expression references oldSelf (a transition rule) */
  usesOldSelf: boolean;
}

function buildEnvironment(optionalOldSelf: boolean): Environment {
  const env = new Environment({
    unlistedVariablesAreDyn: false,
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
  });
  env.registerVariable("self", "dyn");
  env.registerVariable("oldSelf", optionalOldSelf ? "optional<dyn>" : "dyn");
  registerKubernetesLibraries(env);
  registerIpLibraries(env);
  return env;
}

const shared = new Map<boolean, Environment>();
function environment(optionalOldSelf: boolean): Environment {
  let env = shared.get(optionalOldSelf);
  if (env === undefined) {
    env = buildEnvironment(optionalOldSelf);
    shared.set(optionalOldSelf, env);
  }
  return env;
}

function firstLine(message: string): string {
  return (message.split("\n")[0] ?? message).trim();
}

// Walks the parsed AST ({ op, args } nodes, args nested in arrays), including macro arguments such as
// has(oldSelf.x), which the library's old array structure leaves as objects.
function referencesOldSelf(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(referencesOldSelf);
  if (node === null || typeof node !== "object") return false;
  const { op, args } = node as { op?: unknown; args?: unknown };
  if (op === "id") return args === "oldSelf";
  return referencesOldSelf(args);
}

interface AstNode {
  op: string;
  args: unknown;
  pos: number;
}

/** cel-go's error rendering: location, message, the source line and a caret under the column. */
function celGoError(ast: AstNode, column: number, message: string): string {
  const input = (ast as unknown as { input?: string }).input ?? "";
  const before = input.slice(0, column - 1);
  const line = before.split("\n").length;
  const lineStart = before.lastIndexOf("\n") + 1;
  const col = column - lineStart;
  const source = input.split("\n")[line - 1] ?? "";
  return `ERROR: <input>:${line}:${col}: ${message}\n | ${source}\n | ${".".repeat(Math.max(0, col - 1))}^`;
}

function isAst(v: unknown): v is AstNode {
  return typeof v === "object" && v !== null && "op" in v && "args" in v;
}

/** What a select on a schema node yields: a node, "unknown" (no static type), or an error. */
function selectField(node: Node | "unknown", field: string, isRoot: boolean): Node | "unknown" | undefined {
  if (node === "unknown") return "unknown";
  if (node.preserveUnknownFields || node.intOrString || node.type === undefined) return "unknown";
  if (node.type !== "object") return undefined;
  if (isRoot && (field === "apiVersion" || field === "kind" || field === "metadata")) return "unknown";
  if (node.embeddedResource && (field === "apiVersion" || field === "kind" || field === "metadata")) return "unknown";
  const prop = node.properties?.[field];
  if (prop !== undefined) return prop;
  if (node.additionalProperties !== undefined)
    return node.additionalProperties === true ? "unknown" : node.additionalProperties;
  return undefined;
}

/**
 * Static field check against the schema, as cel-go's type checker does with the declared type of
 * self: selecting an undeclared field of a structural object is a compile error in Kubernetes.
 */
function checkSelects(ast: AstNode, root: Node, isRoot: boolean): string | undefined {
  let problem: string | undefined;
  const resolve = (n: AstNode): Node | "unknown" => {
    if (n.op === "id") return n.args === "self" || n.args === "oldSelf" ? root : "unknown";
    if ((n.op === "." || n.op === ".?") && Array.isArray(n.args) && isAst(n.args[0]) && typeof n.args[1] === "string") {
      const base = n.args[0];
      const baseType = resolve(base);
      const out = selectField(baseType, n.args[1], baseType === root && isRoot && base.op === "id");
      if (out === undefined) {
        problem ??= celGoError(ast, n.pos - (n.op === ".?" ? 1 : 0), `undefined field '${n.args[1]}'`);
        return "unknown";
      }
      return out;
    }
    if (n.op === "[]" && Array.isArray(n.args) && isAst(n.args[0])) {
      const baseType = resolve(n.args[0]);
      visitArgs(n.args.slice(1));
      if (baseType !== "unknown" && baseType.type === "array") return baseType.items ?? "unknown";
      if (
        baseType !== "unknown" &&
        baseType.additionalProperties !== undefined &&
        baseType.additionalProperties !== true
      )
        return baseType.additionalProperties;
      return "unknown";
    }
    visitArgs(n.args);
    return "unknown";
  };
  const visitArgs = (args: unknown): void => {
    if (isAst(args)) resolve(args);
    else if (Array.isArray(args)) for (const a of args) visitArgs(a);
  };
  resolve(ast);
  return problem;
}

/** Compiles one expression; throws an Error whose message reads like kube's "compilation failed: ..." detail. */
export function compileCel(
  expression: string,
  expect: "bool" | "string",
  self?: { node: Node; isRoot: boolean },
  optionalOldSelf = false,
): CelProgram {
  const env = environment(optionalOldSelf);
  const parsed = parseOrThrow(env, expression);
  const checked = parsed.check();
  if (!checked.valid) {
    throw new Error(`compilation failed: ERROR: <input>: ${firstLine(checked.error?.message ?? "type error")}`);
  }
  if (checked.type !== expect && checked.type !== "dyn") {
    throw new Error(
      expect === "bool" ? "cel expression must evaluate to a bool" : "messageExpression must evaluate to a string",
    );
  }
  if (self !== undefined) {
    const problem = checkSelects(parsed.ast as unknown as AstNode, self.node, self.isRoot);
    if (problem !== undefined) throw new Error(`compilation failed: ${problem}`);
  }
  const usesOldSelf = referencesOldSelf(parsed.ast);
  return {
    usesOldSelf,
    evaluate: (vars) => parsed(vars),
  };
}

/** The variables a ValidatingAdmissionPolicy's expressions see (all dyn; `authorizer` is not offered by devkube). */
const ADMISSION_VARIABLES = ["object", "oldObject", "request", "params", "namespaceObject", "variables"] as const;

let admissionEnv: Environment | undefined;
function admissionEnvironment(): Environment {
  if (admissionEnv === undefined) {
    const env = new Environment({
      unlistedVariablesAreDyn: false,
      homogeneousAggregateLiterals: false,
      enableOptionalTypes: true,
    });
    for (const name of ADMISSION_VARIABLES) env.registerVariable(name, "dyn");
    registerKubernetesLibraries(env);
    registerIpLibraries(env);
    admissionEnv = env;
  }
  return admissionEnv;
}

function referencesIdent(node: unknown, name: string): boolean {
  if (Array.isArray(node)) return node.some((n) => referencesIdent(n, name));
  if (node === null || typeof node !== "object") return false;
  const { op, args } = node as { op?: unknown; args?: unknown };
  if (op === "id") return args === name;
  return referencesIdent(args, name);
}

/** Parses, or throws an Error worded like kube's syntax errors. */
function parseOrThrow(env: Environment, expression: string): ReturnType<Environment["parse"]> {
  try {
    return env.parse(expression);
  } catch (err) {
    throw new Error(`compilation failed: ERROR: <input>: Syntax error: ${firstLine((err as Error).message)}`, {
      cause: err,
    });
  }
}

/**
 * Compiles an admission-policy expression (validation, messageExpression, matchCondition, variable) against
 * object/oldObject/request/params/namespaceObject/variables; throws an Error worded like kube's "compilation failed: ...".
 */
export function compileAdmissionCel(expression: string, expect: "bool" | "string" | "any"): CelProgram {
  const env = admissionEnvironment();
  const parsed = parseOrThrow(env, expression);
  if (referencesIdent(parsed.ast, "authorizer"))
    throw new Error("compilation failed: devkube does not support the authorizer variable");
  const checked = parsed.check();
  if (!checked.valid) {
    const message = firstLine(checked.error?.message ?? "type error").replace(
      /^Unknown variable: (\S+)/,
      "undeclared reference to '$1'",
    );
    throw new Error(`compilation failed: ERROR: <input>: ${message}`);
  }
  if (expect !== "any" && checked.type !== expect && checked.type !== "dyn") {
    throw new Error(expect === "bool" ? `must evaluate to bool` : `must evaluate to string`);
  }
  return { usesOldSelf: false, evaluate: (vars) => parsed(vars) };
}

/**
 * Converts a decoded JSON value to a CEL value typed by its schema: integers as bigint, objects and
 * lists recursively. Unknown (preserved) content follows JSON: integral numbers become int.
 * At the resource root only metadata.name/generateName are visible, as in Kubernetes.
 */
export function toCel(value: unknown, node: Node | undefined, isRoot = false): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "number") {
    if (node?.type === "number") return value;
    if (node?.type === "integer" || node?.intOrString || node === undefined || node.preserveUnknownFields) {
      return Number.isInteger(value) ? BigInt(value) : value;
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => toCel(v, node?.items));
  if (isObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if ((isRoot || node?.embeddedResource === true) && k === "metadata" && isObject(v)) {
        const meta: Record<string, unknown> = {};
        if (typeof v["name"] === "string") meta["name"] = v["name"];
        if (typeof v["generateName"] === "string") meta["generateName"] = v["generateName"];
        out[k] = meta;
        continue;
      }
      const prop = node?.properties?.[k];
      const sub = prop ?? (node?.additionalProperties !== true ? node?.additionalProperties : undefined);
      out[k] = toCel(v, sub);
    }
    return out;
  }
  return value;
}
