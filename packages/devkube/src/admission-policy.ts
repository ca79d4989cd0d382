import { base, known } from "./builtins.ts";
import { invalid, type FieldCause } from "./errors.ts";
import type { ListTypes } from "./patch/index.ts";
import type { BuiltinTable, ResourceType } from "./resource-type.ts";
import { compileAdmissionCel } from "./schema/cel.ts";
import { AGE_COLUMN, age, column, NAME_COLUMN } from "./table.ts";
import { isObj, metaOf, type Obj } from "./types.ts";

// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding as stored objects:
// defaulting and the validation of k8s.io/kubernetes/pkg/apis/admissionregistration/validation that a manifest can
// get wrong (required fields, enums, CEL that does not compile). admission.ts evaluates them on every write.

export const GROUP = "admissionregistration.k8s.io";
export const POLICY_KEY = `${GROUP}/validatingadmissionpolicies`;
export const BINDING_KEY = `${GROUP}/validatingadmissionpolicybindings`;

const OPERATIONS = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
const SCOPES = ["*", "Cluster", "Namespaced"];
const REASONS = ["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"];
const ACTIONS = ["Deny", "Warn", "Audit"];
const LABEL_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"];
const CEL_IDENT = /^[_a-zA-Z][_a-zA-Z0-9]*$/;
const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

const RULE = ["resourceNames", "operations", "apiGroups", "apiVersions", "resources", "scope"];
const MATCH_RESOURCES = ["namespaceSelector", "objectSelector", "resourceRules", "excludeResourceRules", "matchPolicy"];
const SELECTOR = ["matchLabels", "matchExpressions"];

const specOf = (o: Obj): Obj => (isObj(o["spec"]) ? o["spec"] : {});
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Upstream defaults (SetDefaults_MatchResources, _NamedRuleWithOperations, _ValidatingAdmissionPolicySpec). */
function defaultMatchResources(m: Obj): void {
  m["namespaceSelector"] ??= {};
  m["objectSelector"] ??= {};
  m["matchPolicy"] ??= "Equivalent";
  for (const key of ["resourceRules", "excludeResourceRules"])
    for (const r of list(m[key])) if (isObj(r)) r["scope"] ??= "*";
}

function checkSelector(sel: unknown, field: string, causes: FieldCause[]): void {
  if (sel === undefined || sel === null) return;
  if (!isObj(sel)) {
    causes.push({ type: "FieldValueInvalid", field, message: "Invalid value: must be a label selector" });
    return;
  }
  list(sel["matchExpressions"]).forEach((e, i) => {
    const at = `${field}.matchExpressions[${i}]`;
    if (!isObj(e)) return;
    const op = String(e["operator"] ?? "");
    if (!LABEL_OPERATORS.includes(op))
      causes.push({
        type: "FieldValueNotSupported",
        field: `${at}.operator`,
        message: `Unsupported value: "${op}": supported values: ${LABEL_OPERATORS.map((x) => `"${x}"`).join(", ")}`,
      });
    const values = list(e["values"]);
    if ((op === "In" || op === "NotIn") && values.length === 0)
      causes.push({
        type: "FieldValueRequired",
        field: `${at}.values`,
        message: "Required value: must be specified when `operator` is 'In' or 'NotIn'",
      });
    if ((op === "Exists" || op === "DoesNotExist") && values.length > 0)
      causes.push({
        type: "FieldValueForbidden",
        field: `${at}.values`,
        message: "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
      });
  });
}

function checkRules(rules: unknown, field: string, causes: FieldCause[]): void {
  list(rules).forEach((r, i) => {
    const at = `${field}[${i}]`;
    if (!isObj(r)) return;
    for (const k of ["operations", "apiGroups", "apiVersions", "resources"]) {
      if (list(r[k]).length === 0)
        causes.push({ type: "FieldValueRequired", field: `${at}.${k}`, message: "Required value" });
    }
    for (const op of list(r["operations"])) {
      if (!OPERATIONS.includes(String(op)))
        causes.push({
          type: "FieldValueNotSupported",
          field: `${at}.operations`,
          message: `Unsupported value: "${String(op)}": supported values: ${OPERATIONS.map((x) => `"${x}"`).join(", ")}`,
        });
    }
    if (!SCOPES.includes(String(r["scope"])))
      causes.push({
        type: "FieldValueNotSupported",
        field: `${at}.scope`,
        message: `Unsupported value: "${String(r["scope"])}": supported values: ${SCOPES.map((x) => `"${x}"`).join(", ")}`,
      });
  });
}

function checkMatchResources(m: unknown, field: string, causes: FieldCause[], rulesRequired: boolean): void {
  if (!isObj(m)) {
    if (rulesRequired) causes.push({ type: "FieldValueRequired", field, message: "Required value" });
    return;
  }
  if (!["Exact", "Equivalent"].includes(String(m["matchPolicy"])))
    causes.push({
      type: "FieldValueNotSupported",
      field: `${field}.matchPolicy`,
      message: `Unsupported value: "${String(m["matchPolicy"])}": supported values: "Equivalent", "Exact"`,
    });
  checkSelector(m["namespaceSelector"], `${field}.namespaceSelector`, causes);
  checkSelector(m["objectSelector"], `${field}.objectSelector`, causes);
  if (rulesRequired && list(m["resourceRules"]).length === 0)
    causes.push({ type: "FieldValueRequired", field: `${field}.resourceRules`, message: "Required value" });
  checkRules(m["resourceRules"], `${field}.resourceRules`, causes);
  checkRules(m["excludeResourceRules"], `${field}.excludeResourceRules`, causes);
}

function checkExpression(
  expression: unknown,
  field: string,
  expect: "bool" | "string" | "any",
  causes: FieldCause[],
): void {
  if (typeof expression !== "string" || expression.trim() === "") {
    causes.push({ type: "FieldValueRequired", field, message: "Required value" });
    return;
  }
  try {
    compileAdmissionCel(expression, expect);
  } catch (err) {
    causes.push({
      type: "FieldValueInvalid",
      field,
      message: `Invalid value: ${JSON.stringify(expression)}: ${(err as Error).message}`,
    });
  }
}

function checkNamed(
  items: unknown,
  field: string,
  causes: FieldCause[],
  nameRule: (n: string) => boolean,
  nameMessage: string,
  expect: "bool" | "any",
): void {
  const seen = new Set<string>();
  list(items).forEach((item, i) => {
    const at = `${field}[${i}]`;
    if (!isObj(item)) return;
    const name = typeof item["name"] === "string" ? item["name"] : "";
    if (!name) causes.push({ type: "FieldValueRequired", field: `${at}.name`, message: "Required value" });
    else if (!nameRule(name))
      causes.push({
        type: "FieldValueInvalid",
        field: `${at}.name`,
        message: `Invalid value: "${name}": ${nameMessage}`,
      });
    else if (seen.has(name))
      causes.push({ type: "FieldValueDuplicate", field: `${at}.name`, message: `Duplicate value: "${name}"` });
    seen.add(name);
    checkExpression(item["expression"], `${at}.expression`, expect, causes);
  });
}

function preparePolicy(o: Obj): void {
  const spec = specOf(o);
  o["spec"] = spec;
  spec["failurePolicy"] ??= "Fail";
  if (isObj(spec["matchConstraints"])) defaultMatchResources(spec["matchConstraints"]);
  const causes: FieldCause[] = [];
  if (!["Fail", "Ignore"].includes(String(spec["failurePolicy"])))
    causes.push({
      type: "FieldValueNotSupported",
      field: "spec.failurePolicy",
      message: `Unsupported value: "${String(spec["failurePolicy"])}": supported values: "Fail", "Ignore"`,
    });
  if (spec["paramKind"] !== undefined && spec["paramKind"] !== null) {
    // devkube has no parameter resources: a policy that needs them would be evaluated wrongly, so it is refused.
    causes.push({
      type: "FieldValueForbidden",
      field: "spec.paramKind",
      message: "Forbidden: devkube does not support parameter resources (params is always null)",
    });
  }
  checkMatchResources(spec["matchConstraints"], "spec.matchConstraints", causes, true);
  if (list(spec["validations"]).length === 0 && list(spec["auditAnnotations"]).length === 0) {
    causes.push({
      type: "FieldValueRequired",
      field: "spec.validations",
      message: "Required value: validations or auditAnnotations must contain at least one item",
    });
  }
  list(spec["validations"]).forEach((v, i) => {
    const at = `spec.validations[${i}]`;
    if (!isObj(v)) return;
    checkExpression(v["expression"], `${at}.expression`, "bool", causes);
    if (typeof v["messageExpression"] === "string" && v["messageExpression"] !== "")
      checkExpression(v["messageExpression"], `${at}.messageExpression`, "string", causes);
    if (typeof v["message"] === "string" && v["message"].includes("\n"))
      causes.push({
        type: "FieldValueInvalid",
        field: `${at}.message`,
        message: `Invalid value: ${JSON.stringify(v["message"])}: message must not contain line breaks`,
      });
    if (v["reason"] !== undefined && v["reason"] !== null && !REASONS.includes(String(v["reason"]))) {
      causes.push({
        type: "FieldValueNotSupported",
        field: `${at}.reason`,
        message: `Unsupported value: "${String(v["reason"])}": supported values: ${REASONS.map((x) => `"${x}"`).join(", ")}`,
      });
    }
  });
  list(spec["auditAnnotations"]).forEach((a, i) => {
    if (isObj(a)) checkExpression(a["valueExpression"], `spec.auditAnnotations[${i}].valueExpression`, "any", causes);
  });
  checkNamed(
    spec["matchConditions"],
    "spec.matchConditions",
    causes,
    (n) => QUALIFIED_NAME.test(n) && n.length <= 316,
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
    "bool",
  );
  checkNamed(
    spec["variables"],
    "spec.variables",
    causes,
    (n) => CEL_IDENT.test(n),
    "name is not a valid CEL identifier",
    "any",
  );
  if (causes.length > 0) throw invalid("ValidatingAdmissionPolicy", GROUP, String(metaOf(o)["name"] ?? ""), causes);
}

function prepareBinding(o: Obj): void {
  const spec = specOf(o);
  o["spec"] = spec;
  if (isObj(spec["matchResources"])) defaultMatchResources(spec["matchResources"]);
  const causes: FieldCause[] = [];
  if (typeof spec["policyName"] !== "string" || spec["policyName"] === "")
    causes.push({ type: "FieldValueRequired", field: "spec.policyName", message: "Required value" });
  const actions = list(spec["validationActions"]).map(String);
  if (actions.length === 0)
    causes.push({
      type: "FieldValueRequired",
      field: "spec.validationActions",
      message: "Required value: at least one validation action is required",
    });
  const seen = new Set<string>();
  actions.forEach((a, i) => {
    if (!ACTIONS.includes(a))
      causes.push({
        type: "FieldValueNotSupported",
        field: `spec.validationActions[${i}]`,
        message: `Unsupported value: "${a}": supported values: "Audit", "Deny", "Warn"`,
      });
    else if (seen.has(a))
      causes.push({
        type: "FieldValueDuplicate",
        field: `spec.validationActions[${i}]`,
        message: `Duplicate value: "${a}"`,
      });
    seen.add(a);
  });
  if (seen.has("Deny") && seen.has("Warn"))
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.validationActions",
      message: `Invalid value: ${JSON.stringify(actions)}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)`,
    });
  if (spec["paramRef"] !== undefined && spec["paramRef"] !== null)
    causes.push({
      type: "FieldValueForbidden",
      field: "spec.paramRef",
      message: "Forbidden: devkube does not support parameter resources (params is always null)",
    });
  if (spec["matchResources"] !== undefined)
    checkMatchResources(spec["matchResources"], "spec.matchResources", causes, false);
  if (causes.length > 0)
    throw invalid("ValidatingAdmissionPolicyBinding", GROUP, String(metaOf(o)["name"] ?? ""), causes);
}

const POLICY_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column(
      "Validations",
      "integer",
      "Validations indicates the number of validation rules defined in this configuration",
    ),
    column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const pk = specOf(o)["paramKind"];
    return [
      metaOf(o)["name"],
      list(specOf(o)["validations"]).length,
      isObj(pk) ? `${String(pk["apiVersion"])}/${String(pk["kind"])}` : "<unset>",
      age(o, now),
    ];
  },
};
const BINDING_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
    column("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
    AGE_COLUMN,
  ],
  cells: (o, now) => [metaOf(o)["name"], specOf(o)["policyName"] ?? "", "<unset>", age(o, now)],
};

/** Upstream list types: matchConditions is a map keyed by name, validationActions a set, the others atomic (variables too: their order matters). */
const LIST_TYPES: Record<string, { type: "map"; keys: string[] } | { type: "set" }> = {
  "spec.matchConditions": { type: "map", keys: ["name"] },
  "spec.validationActions": { type: "set" },
};
const listTypes: ListTypes = (path) => LIST_TYPES[path.join(".")];

function matchResourceFields(prefix: string): Record<string, string[]> {
  return {
    [prefix]: MATCH_RESOURCES,
    [`${prefix}.resourceRules[]`]: RULE,
    [`${prefix}.excludeResourceRules[]`]: RULE,
    [`${prefix}.namespaceSelector`]: SELECTOR,
    [`${prefix}.objectSelector`]: SELECTOR,
  };
}

export function admissionPolicyResourceTypes(): ResourceType[] {
  return [
    base(GROUP, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false, {
      subresources: ["status"],
      generation: true,
      knownFields: known("spec", "status"),
      table: POLICY_TABLE,
      listTypes,
      nestedKnownFields: {
        spec: [
          "paramKind",
          "matchConstraints",
          "validations",
          "failurePolicy",
          "auditAnnotations",
          "matchConditions",
          "variables",
        ],
        "spec.paramKind": ["apiVersion", "kind"],
        ...matchResourceFields("spec.matchConstraints"),
        "spec.validations[]": ["expression", "message", "reason", "messageExpression"],
        "spec.auditAnnotations[]": ["key", "valueExpression"],
        "spec.matchConditions[]": ["name", "expression"],
        "spec.variables[]": ["name", "expression"],
      },
      prepare: preparePolicy,
    }),
    base(GROUP, "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false, {
      generation: true,
      knownFields: known("spec"),
      table: BINDING_TABLE,
      listTypes,
      nestedKnownFields: {
        spec: ["policyName", "paramRef", "matchResources", "validationActions"],
        ...matchResourceFields("spec.matchResources"),
      },
      prepare: prepareBinding,
    }),
  ];
}
