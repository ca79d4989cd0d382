import { BINDING_KEY, GROUP, POLICY_KEY } from "./admission-policy.ts";
import { ApiError, qualified } from "./errors.ts";
import type { UserInfo } from "./rbac.ts";
import type { Registry } from "./registry.ts";
import type { ResourceType } from "./resource-type.ts";
import { compileAdmissionCel, toCel, type CelProgram } from "./schema/cel.ts";
import type { Store } from "./store.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

// ValidatingAdmissionPolicy evaluation (k8s.io/apiserver/pkg/admission/plugin/policy/validating): on every
// CREATE, UPDATE and DELETE, each policy whose matchConstraints match the request and each of its bindings
// whose matchResources match evaluate matchConditions, then validations, in CEL. A failed validation is denied
// (Deny), returned as a Warning header (Warn) or ignored (Audit: devkube has no audit log). Expression errors
// follow failurePolicy. Wording, status codes and order follow the upstream dispatcher.

type Operation = "CREATE" | "UPDATE" | "DELETE";

export interface AdmissionRequest {
  operation: Operation;
  /** The resource type the request was made at (its version). */
  rt: ResourceType;
  subresource: string | undefined;
  /** "" for cluster-scoped resources. */
  namespace: string;
  name: string;
  /** Wire form at rt's version: undefined on DELETE (object) and CREATE (oldObject). */
  object: Obj | undefined;
  oldObject: Obj | undefined;
  user: UserInfo;
  dryRun: boolean;
  /** CreateOptions / UpdateOptions / DeleteOptions as the request's `options`. */
  options: Obj;
}

/** A request refused by a policy: thrown by admit(), and recognised by devkube's controllers. */
export class AdmissionDenied extends ApiError {}

interface Expr {
  expression: string;
  program?: CelProgram;
  error?: string;
}
interface Compiled {
  matchConditions: Array<Expr & { name: string }>;
  variables: Array<Expr & { name: string }>;
  validations: Array<Expr & { message: string; reason: string; messageExpression?: Expr }>;
  failurePolicy: string;
}

interface Decision {
  action: "admit" | "deny";
  message: string;
  reason: string;
}

/** Converts an object from one served version of a resource to another (matchPolicy Equivalent). */
type Converter = (from: ResourceType, to: ResourceType, obj: Obj) => Obj;

const EXEMPT_KINDS = [
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
  "ValidatingWebhookConfiguration",
  "MutatingWebhookConfiguration",
  "MutatingAdmissionPolicy",
  "MutatingAdmissionPolicyBinding",
];

export class PolicyAdmission {
  private readonly store: Store;
  private readonly registry: Registry;
  private readonly convert: Converter;
  private readonly cache = new Map<string, Compiled>();

  constructor(store: Store, registry: Registry, convert: Converter) {
    this.store = store;
    this.registry = registry;
    this.convert = convert;
  }

  hasPolicies(): boolean {
    return this.store.sorted(POLICY_KEY, undefined).length > 0;
  }

  /** Warnings to return with the answer; throws AdmissionDenied when a Deny binding's validation fails. */
  admit(req: AdmissionRequest): string[] {
    // as upstream, admission configuration objects themselves are never subject to policies
    if (req.rt.group === GROUP && EXEMPT_KINDS.includes(req.rt.kind)) return [];
    const policies = this.store.sorted(POLICY_KEY, undefined).map(([, o]) => o);
    if (policies.length === 0) return [];
    const bindings = this.store.sorted(BINDING_KEY, undefined).map(([, o]) => o);
    const warnings: string[] = [];
    const denied: Array<{ policy: string; binding: string; decision: Decision }> = [];
    for (const policy of policies) {
      const policyName = String(metaOf(policy)["name"]);
      const spec = isObj(policy["spec"]) ? policy["spec"] : {};
      const matched = this.matches(spec["matchConstraints"], req, true);
      if (!matched) continue;
      const bound = bindings.filter((b) => isObj(b["spec"]) && b["spec"]["policyName"] === policyName);
      if (bound.length === 0) continue;
      const compiled = this.compile(policy);
      for (const binding of bound) {
        const bspec = binding["spec"] as Obj;
        if (bspec["matchResources"] !== undefined && !this.matches(bspec["matchResources"], req, false)) continue;
        const decisions = this.evaluate(compiled, req, matched);
        const actions = Array.isArray(bspec["validationActions"]) ? bspec["validationActions"].map(String) : [];
        for (const decision of decisions) {
          if (decision.action !== "deny") continue;
          if (actions.includes("Deny"))
            denied.push({ policy: policyName, binding: String(metaOf(binding)["name"]), decision });
          if (actions.includes("Warn"))
            warnings.push(
              `Validation failed for ValidatingAdmissionPolicy '${policyName}' with binding '${String(metaOf(binding)["name"])}': ${decision.message}`,
            );
        }
      }
    }
    const first = denied[0];
    if (first) {
      // admission.NewForbidden(attributes, "ValidatingAdmissionPolicy '…' with binding '…' denied request: …"), then
      // the validation's reason (Invalid by default) sets reason and code
      const inner = `ValidatingAdmissionPolicy '${first.policy}' with binding '${first.binding}' denied request: ${first.decision.message}`;
      const reason = first.decision.reason || "Invalid";
      const codes: Record<string, number> = {
        Forbidden: 403,
        Unauthorized: 401,
        RequestEntityTooLarge: 413,
        Invalid: 422,
      };
      const message = req.name
        ? `${qualified(req.rt)} "${req.name}" is forbidden: ${inner}`
        : `${qualified(req.rt)} is forbidden: ${inner}`;
      throw new AdmissionDenied(codes[reason] ?? 422, reason, message, {
        name: req.name,
        ...(req.rt.group ? { group: req.rt.group } : {}),
        kind: req.rt.plural,
        causes: [{ message: inner }],
      });
    }
    return warnings;
  }

  // ------------------------------------------------------------------ matching

  /** The resource type the request matches as (its own, or an equivalent version), or undefined. */
  private matches(m: unknown, req: AdmissionRequest, rulesRequired: boolean): ResourceType | undefined {
    if (!isObj(m)) return rulesRequired ? undefined : req.rt;
    if (!this.namespaceSelectorMatches(m["namespaceSelector"], req)) return undefined;
    const objSel = m["objectSelector"];
    if (!selectorEmpty(objSel)) {
      // the object or the old object must match (a DELETE has only the old one, a CREATE only the new one)
      const hit = (o: Obj | undefined) => o !== undefined && labelsMatch(objSel, labelsOf(o));
      if (!hit(req.object) && !hit(req.oldObject)) return undefined;
    }
    const exact = m["matchPolicy"] === "Exact";
    if (this.rulesMatch(m["excludeResourceRules"], req, exact)) return undefined;
    const rules = Array.isArray(m["resourceRules"]) ? m["resourceRules"] : [];
    if (rules.length === 0) return rulesRequired ? undefined : req.rt;
    return this.rulesMatch(rules, req, exact);
  }

  private rulesMatch(rules: unknown, req: AdmissionRequest, exact: boolean): ResourceType | undefined {
    const list = Array.isArray(rules) ? rules.filter(isObj) : [];
    for (const rule of list) {
      if (!ruleMatches(rule, req, req.rt)) continue;
      const names = Array.isArray(rule["resourceNames"]) ? rule["resourceNames"].map(String) : [];
      if (names.length === 0 || names.includes(req.name)) return req.rt;
    }
    if (exact) return undefined;
    // matchPolicy Equivalent: another served version of the same resource matches too (objects are converted to it)
    const equivalents = this.registry
      .all()
      .filter((t) => t.storageKey === req.rt.storageKey && t !== req.rt && t.plural === req.rt.plural);
    for (const rule of list) for (const t of equivalents) if (ruleMatches(rule, req, t)) return t;
    return undefined;
  }

  private namespaceSelectorMatches(sel: unknown, req: AdmissionRequest): boolean {
    const isNamespace = req.rt.group === "" && req.rt.plural === "namespaces";
    if (req.namespace === "" && !isNamespace) return true;
    if (selectorEmpty(sel)) return true;
    const labels = isNamespace
      ? labelsOf(req.object ?? req.oldObject)
      : labelsOf(this.store.get("/namespaces", "", req.namespace));
    return labelsMatch(sel, labels);
  }

  // ------------------------------------------------------------------ evaluation

  private compile(policy: Obj): Compiled {
    const key = `${String(metaOf(policy)["uid"])}@${String(metaOf(policy)["resourceVersion"])}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const spec = isObj(policy["spec"]) ? policy["spec"] : {};
    const tryCompile = (expr: unknown, expect: "bool" | "string" | "any"): Expr => {
      const expression = String(expr ?? "");
      try {
        return { expression, program: compileAdmissionCel(expression, expect) };
      } catch (err) {
        return { expression, error: (err as Error).message };
      }
    };
    const named = (v: unknown) => (Array.isArray(v) ? v.filter(isObj) : []);
    const compiled: Compiled = {
      failurePolicy: String(spec["failurePolicy"] ?? "Fail"),
      matchConditions: named(spec["matchConditions"]).map((c) => ({
        name: String(c["name"]),
        ...tryCompile(c["expression"], "bool"),
      })),
      variables: named(spec["variables"]).map((v) => ({
        name: String(v["name"]),
        ...tryCompile(v["expression"], "any"),
      })),
      validations: named(spec["validations"]).map((v) => ({
        ...tryCompile(v["expression"], "bool"),
        message: typeof v["message"] === "string" ? v["message"] : "",
        reason: typeof v["reason"] === "string" ? v["reason"] : "Invalid",
        ...(typeof v["messageExpression"] === "string" && v["messageExpression"]
          ? { messageExpression: tryCompile(v["messageExpression"], "string") }
          : {}),
      })),
    };
    if (this.cache.size > 256) this.cache.clear();
    this.cache.set(key, compiled);
    return compiled;
  }

  private evaluate(c: Compiled, req: AdmissionRequest, matched: ResourceType): Decision[] {
    const onError = (message: string): Decision[] =>
      c.failurePolicy === "Ignore" ? [] : [{ action: "deny", message, reason: "" }];
    const vars = this.variables(req, matched);
    const values: Record<string, unknown> = {};
    const failed = new Map<string, string>();
    vars["variables"] = values;
    const run = (e: Expr): { value?: unknown; error?: string } => {
      if (!e.program) return { error: `compilation error: ${e.error ?? "compilation failed"}` };
      const problem = variableProblem(e.expression, failed);
      if (problem) return { error: `expression '${e.expression}' resulted in error: ${problem}` };
      try {
        return { value: e.program.evaluate(vars) };
      } catch (err) {
        return { error: `expression '${e.expression}' resulted in error: ${celError(err)}` };
      }
    };
    // variables: in order, each seeing the earlier ones; a failed one fails the expressions that read it
    for (const v of c.variables) {
      const r = run(v);
      if (r.error !== undefined) failed.set(v.name, r.error);
      else values[v.name] = r.value;
    }
    // matchConditions: any false skips the policy; otherwise their errors are failures
    const errors: string[] = [];
    for (const m of c.matchConditions) {
      const r = run(m);
      if (r.error !== undefined) errors.push(r.error);
      else if (r.value === false) return [];
      else if (r.value !== true) errors.push(`matchCondition '${m.name}' must evaluate to bool`);
    }
    if (errors.length > 0) return onError(errors.length === 1 ? (errors[0] as string) : `[${errors.join(", ")}]`);
    const decisions: Decision[] = [];
    for (const v of c.validations) {
      const r = run(v);
      if (r.error !== undefined) {
        decisions.push(...onError(r.error));
        continue;
      }
      if (r.value === true) continue;
      let message = "";
      if (v.messageExpression) {
        // a messageExpression that fails, or yields no single-line string, falls back to message
        const m = run(v.messageExpression).value;
        if (typeof m === "string" && m.trim().length <= 5 * 1024 && !m.includes("\n")) message = m.trim();
      }
      if (!message && v.message) message = v.message.trim();
      if (!message) message = `failed expression: ${v.expression.trim()}`;
      decisions.push({ action: "deny", message, reason: v.reason });
    }
    return decisions;
  }

  /** object, oldObject (converted to the matched version), request, params, namespaceObject. */
  private variables(req: AdmissionRequest, matched: ResourceType): Record<string, unknown> {
    const asMatched = (o: Obj | undefined) =>
      o === undefined ? null : toCel(matched === req.rt ? o : this.convert(req.rt, matched, o), undefined);
    const gvk = (t: ResourceType) => ({ group: t.group, version: t.version, kind: t.kind });
    const gvr = (t: ResourceType) => ({ group: t.group, version: t.version, resource: t.plural });
    const request: Obj = {
      kind: gvk(matched),
      resource: gvr(matched),
      requestKind: gvk(req.rt),
      requestResource: gvr(req.rt),
      ...(req.subresource ? { subResource: req.subresource, requestSubResource: req.subresource } : {}),
      name: req.name,
      namespace: req.namespace,
      operation: req.operation,
      userInfo: {
        username: req.user.name,
        ...(req.user.serviceAccount ? { uid: req.user.serviceAccount.uid } : {}),
        groups: req.user.groups,
      },
      dryRun: req.dryRun,
      options: req.options,
      uid: "",
    };
    const isNamespace = req.rt.group === "" && req.rt.plural === "namespaces";
    const ns = req.namespace && !isNamespace ? this.store.get("/namespaces", "", req.namespace) : undefined;
    return {
      object: asMatched(req.object),
      oldObject: asMatched(req.oldObject),
      request: toCel(request, undefined),
      params: null,
      namespaceObject: ns ? toCel(namespaceObject(ns), undefined) : null,
    };
  }
}

/** `composited variable "x" fails to evaluate: …` when the expression reads a variable that failed. */
function variableProblem(expression: string, failed: Map<string, string>): string | undefined {
  if (failed.size === 0) return undefined;
  for (const m of expression.matchAll(/\bvariables\s*\.\s*([_a-zA-Z][_a-zA-Z0-9]*)/g)) {
    const why = failed.get(m[1] as string);
    if (why !== undefined) return `composited variable "${m[1] as string}" fails to evaluate: ${why}`;
  }
  return undefined;
}

function celError(err: unknown): string {
  const text = ((err as Error).message ?? String(err)).split("\n")[0] ?? "";
  return text.charAt(0).toLowerCase() + text.slice(1);
}

function ruleMatches(rule: Obj, req: AdmissionRequest, t: ResourceType): boolean {
  const strs = (v: unknown) => (Array.isArray(v) ? v.map(String) : []);
  const ops = strs(rule["operations"]);
  if (!ops.includes("*") && !ops.includes(req.operation)) return false;
  const groups = strs(rule["apiGroups"]);
  if (!groups.includes("*") && !groups.includes(t.group)) return false;
  const versions = strs(rule["apiVersions"]);
  if (!versions.includes("*") && !versions.includes(t.version)) return false;
  const isNamespace = t.group === "" && t.plural === "namespaces";
  const scope = rule["scope"] ?? "*";
  if (scope === "Namespaced" && (isNamespace || req.namespace === "")) return false;
  if (scope === "Cluster" && !(isNamespace || req.namespace === "")) return false;
  const sub = req.subresource ?? "";
  return strs(rule["resources"]).some((r) => {
    const [res, rsub = ""] = r.split("/", 2) as [string, string?];
    return (res === "*" || res === t.plural) && (rsub === "*" || rsub === sub);
  });
}

function labelsOf(o: Obj | undefined): Record<string, string> {
  if (!o) return {};
  const l = metaOf(o)["labels"];
  return isObj(l) ? (l as Record<string, string>) : {};
}

function selectorEmpty(sel: unknown): boolean {
  if (!isObj(sel)) return true;
  const ml = sel["matchLabels"];
  const me = sel["matchExpressions"];
  return (!isObj(ml) || Object.keys(ml).length === 0) && (!Array.isArray(me) || me.length === 0);
}

/** metav1.LabelSelector semantics: every matchLabels pair and every expression must hold. */
export function labelsMatch(sel: unknown, labels: Record<string, string>): boolean {
  if (!isObj(sel)) return true;
  if (isObj(sel["matchLabels"]))
    for (const [k, v] of Object.entries(sel["matchLabels"])) if (labels[k] !== v) return false;
  for (const e of Array.isArray(sel["matchExpressions"]) ? sel["matchExpressions"].filter(isObj) : []) {
    const key = String(e["key"]);
    const values = Array.isArray(e["values"]) ? e["values"].map(String) : [];
    const has = Object.hasOwn(labels, key);
    switch (e["operator"]) {
      case "In":
        if (!has || !values.includes(labels[key] as string)) return false;
        break;
      case "NotIn":
        if (has && values.includes(labels[key] as string)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/** cel.CreateNamespaceObject: the namespace's spec, status and a subset of its metadata. */
function namespaceObject(ns: Obj): Obj {
  const m = metaOf(ns);
  const meta: Obj = {};
  for (const k of [
    "name",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "finalizers",
  ])
    if (m[k] !== undefined) meta[k] = m[k];
  return { apiVersion: "v1", kind: "Namespace", metadata: meta, spec: ns["spec"] ?? {}, status: ns["status"] ?? {} };
}
