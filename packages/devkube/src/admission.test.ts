import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BINDING_KEY, POLICY_KEY } from "./admission-policy.ts";
import { AdmissionDenied, labelsMatch, PolicyAdmission, type AdmissionRequest } from "./admission.ts";
import { Registry } from "./registry.ts";
import type { ResourceType } from "./resource-type.ts";
import { Store } from "./store.ts";
import type { Obj } from "./types.ts";

// The policy engine without HTTP: rule matching (operations, resources/subresources, scope), label selectors, and
// what happens to a stored policy whose expressions no longer compile.

let dir: string;
let store: Store;
let registry: Registry;
let admission: PolicyAdmission;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "devkube-admission-"));
  store = new Store(dir, 100);
  registry = new Registry();
  admission = new PolicyAdmission(store, registry, (_from, _to, o) => o);
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const rt = (group: string, plural: string): ResourceType => {
  const t = registry.all().find((x) => x.group === group && x.plural === plural);
  if (!t) throw new Error(`no ${group}/${plural}`);
  return t;
};
const admin = { name: "devkube-admin", groups: ["system:masters", "system:authenticated"] };
const req = (over: Partial<AdmissionRequest>): AdmissionRequest => ({
  operation: "CREATE",
  rt: rt("", "configmaps"),
  subresource: undefined,
  namespace: "default",
  name: "c",
  object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "default" } },
  oldObject: undefined,
  user: admin,
  dryRun: false,
  options: {},
  ...over,
});
const policy = (name: string, rule: Obj, extra: Obj = {}) => {
  store.write(POLICY_KEY, {
    metadata: { name, uid: `uid-${name}` },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: {
        resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], scope: "*", ...rule }],
      },
      validations: [{ expression: "false", message: `${name} denies` }],
      ...extra,
    },
  });
  store.write(BINDING_KEY, { metadata: { name }, spec: { policyName: name, validationActions: ["Deny"] } });
};
const denies = (r: AdmissionRequest): string | undefined => {
  try {
    admission.admit(r);
    return undefined;
  } catch (err) {
    if (err instanceof AdmissionDenied) return err.message;
    throw err;
  }
};

describe("rule matching", () => {
  it("'*' matches resources but not subresources; 'x/*' and '*/*' match subresources", () => {
    policy("all", { resources: ["*"] });
    expect(denies(req({}))).toContain("all denies");
    expect(denies(req({ subresource: "status", operation: "UPDATE" }))).toBeUndefined();
    policy("subs", { resources: ["configmaps/*"] });
    expect(denies(req({ subresource: "status", operation: "UPDATE" }))).toContain("subs denies");
  });

  it("operations must match, '*' matches all", () => {
    policy("deletes", { resources: ["configmaps"], operations: ["DELETE"] });
    expect(denies(req({}))).toBeUndefined();
    expect(denies(req({ operation: "DELETE", object: undefined, oldObject: { metadata: { name: "c" } } }))).toContain(
      "deletes denies",
    );
  });

  it("scope: a Namespace counts as cluster-scoped, a namespaced object as Namespaced", () => {
    policy("cluster", { resources: ["*"], scope: "Cluster" });
    const ns = req({ rt: rt("", "namespaces"), namespace: "", name: "team", object: { metadata: { name: "team" } } });
    expect(denies(ns)).toContain("cluster denies");
    expect(denies(req({}))).toBeUndefined();
  });

  it("is not applied to the admission kinds themselves", () => {
    policy("everything", { resources: ["*"] });
    expect(
      denies(req({ rt: rt("admissionregistration.k8s.io", "validatingadmissionpolicies"), namespace: "", name: "p" })),
    ).toBeUndefined();
  });
});

describe("a stored policy whose expression does not compile", () => {
  it("denies under failurePolicy Fail and is ignored under Ignore", () => {
    policy("broken", { resources: ["configmaps"] }, { validations: [{ expression: "self.x" }] });
    expect(denies(req({}))).toMatch(
      /denied request: compilation error: compilation failed: .*undeclared reference to 'self'/,
    );
    policy(
      "broken",
      { resources: ["configmaps"] },
      { failurePolicy: "Ignore", validations: [{ expression: "self.x" }] },
    );
    expect(denies(req({}))).toBeUndefined();
  });
});

describe("labelsMatch", () => {
  const labels = { app: "web", tier: "prod" };
  it.each([
    [{}, true],
    [{ matchLabels: { app: "web" } }, true],
    [{ matchLabels: { app: "db" } }, false],
    [{ matchExpressions: [{ key: "tier", operator: "In", values: ["prod", "staging"] }] }, true],
    [{ matchExpressions: [{ key: "tier", operator: "NotIn", values: ["prod"] }] }, false],
    [{ matchExpressions: [{ key: "missing", operator: "NotIn", values: ["x"] }] }, true],
    [{ matchExpressions: [{ key: "app", operator: "Exists" }] }, true],
    [{ matchExpressions: [{ key: "app", operator: "DoesNotExist" }] }, false],
    [{ matchLabels: { app: "web" }, matchExpressions: [{ key: "missing", operator: "Exists" }] }, false],
  ])("%j → %s", (selector, expected) => {
    expect(labelsMatch(selector, labels)).toBe(expected);
  });
});
