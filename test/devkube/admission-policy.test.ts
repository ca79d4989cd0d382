import { Agent, request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { eventually, startHarness, WIDGET_CRD, type Harness } from "./helpers.ts";

// ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) on devkube: the two kinds as API objects (discovery,
// defaults, validation, tables) and the policy engine on every write: matchConstraints (rules, scope, subresources,
// selectors, exclusions, names), bindings (validationActions, matchResources), matchConditions, variables,
// object/oldObject/request/namespaceObject, messages and reasons, failurePolicy, dry runs, and what kubectl prints.

let h: Harness;
let agent: Agent;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: Record<string, any>;
}

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await request(`${h.devkube.url}${path}`, {
    method: method as "GET",
    headers: {
      authorization: `Bearer ${h.devkube.token}`,
      ...(body !== undefined ? { "content-type": headers["content-type"] ?? "application/json" } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    dispatcher: agent,
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

const VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const CM = (ns: string) => `/api/v1/namespaces/${ns}/configmaps`;
const cm = (name: string, extra: Record<string, unknown> = {}) => ({ metadata: { name, ...extra }, data: { a: "1" } });

/** A policy and (unless binding is null) a binding of the same name; both must be accepted. */
async function install(
  name: string,
  spec: Record<string, unknown>,
  binding: Record<string, unknown> | null = { validationActions: ["Deny"] },
): Promise<void> {
  const p = await call("POST", VAP, {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name },
    spec,
  });
  expect({ status: p.status, message: p.json["message"] }).toEqual({ status: 201, message: undefined });
  if (binding === null) return;
  const b = await call("POST", VAPB, {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name },
    spec: { policyName: name, ...binding },
  });
  expect({ status: b.status, message: b.json["message"] }).toEqual({ status: 201, message: undefined });
}

const rules = (
  resources: string[],
  operations: string[] = ["CREATE", "UPDATE"],
  extra: Record<string, unknown> = {},
) => ({ resourceRules: [{ apiGroups: ["", "example.com"], apiVersions: ["*"], operations, resources, ...extra }] });

beforeAll(async () => {
  h = await startHarness();
  const kubeconfig = parse(h.devkube.kubeconfig) as { clusters: { cluster: Record<string, string> }[] };
  agent = new Agent({
    connect: {
      ca: Buffer.from(kubeconfig.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64").toString(),
    },
  });
  await h.ok(["apply", "-f", "-"], WIDGET_CRD);
  for (const ns of ["vap-a", "vap-b"]) await h.ok(["create", "namespace", ns]);
  await h.ok(["label", "namespace", "vap-a", "tier=prod"]);
  await eventually(async () => (await call("GET", "/apis/example.com/v1/widgets")).status === 200);
});
afterAll(async () => {
  await agent?.close();
  await h?.close();
});
afterEach(async () => {
  await call("DELETE", VAPB);
  await call("DELETE", VAP);
});

describe("the API objects", () => {
  it("are cluster-scoped admissionregistration.k8s.io/v1 resources in discovery", async () => {
    const out = await h.ok(["api-resources", "--api-group=admissionregistration.k8s.io", "--no-headers"]);
    expect(out).toMatch(
      /^validatingadmissionpolicies\s+admissionregistration\.k8s\.io\/v1\s+false\s+ValidatingAdmissionPolicy$/m,
    );
    expect(out).toMatch(
      /^validatingadmissionpolicybindings\s+admissionregistration\.k8s\.io\/v1\s+false\s+ValidatingAdmissionPolicyBinding$/m,
    );
  });

  it("are defaulted as upstream and printed with kubectl's columns", async () => {
    await install("defaults", { matchConstraints: rules(["configmaps"]), validations: [{ expression: "true" }] });
    const p = (await call("GET", `${VAP}/defaults`)).json;
    expect(p["metadata"]["generation"]).toBe(1);
    expect(p["spec"]["failurePolicy"]).toBe("Fail");
    expect(p["spec"]["matchConstraints"]).toMatchObject({
      matchPolicy: "Equivalent",
      namespaceSelector: {},
      objectSelector: {},
      resourceRules: [{ scope: "*" }],
    });
    expect(await h.ok(["get", "validatingadmissionpolicy", "defaults"])).toMatch(
      /^NAME\s+VALIDATIONS\s+PARAMKIND\s+AGE\ndefaults\s+1\s+<unset>\s+\d+s\n$/,
    );
    expect(await h.ok(["get", "validatingadmissionpolicybinding", "defaults"])).toMatch(
      /^NAME\s+POLICYNAME\s+PARAMREF\s+AGE\ndefaults\s+defaults\s+<unset>\s+\d+s\n$/,
    );
  });

  it.each([
    ["no matchConstraints", VAP, { validations: [{ expression: "true" }] }, "spec.matchConstraints: Required value"],
    [
      "no validations",
      VAP,
      { matchConstraints: rules(["configmaps"]) },
      "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
    ],
    [
      "an expression that does not compile",
      VAP,
      { matchConstraints: rules(["configmaps"]), validations: [{ expression: "self.x == 1" }] },
      `spec.validations[0].expression: Invalid value: "self.x == 1": compilation failed: ERROR: <input>: undeclared reference to 'self'`,
    ],
    [
      "a non-bool validation",
      VAP,
      { matchConstraints: rules(["configmaps"]), validations: [{ expression: "'a'" }] },
      "must evaluate to bool",
    ],
    [
      "an unknown operation",
      VAP,
      { matchConstraints: rules(["configmaps"], ["PATCH"]), validations: [{ expression: "true" }] },
      `spec.matchConstraints.resourceRules[0].operations: Unsupported value: "PATCH"`,
    ],
    [
      "an unknown reason",
      VAP,
      { matchConstraints: rules(["configmaps"]), validations: [{ expression: "true", reason: "Teapot" }] },
      `spec.validations[0].reason: Unsupported value: "Teapot"`,
    ],
    [
      "paramKind (devkube has no parameter resources)",
      VAP,
      {
        paramKind: { apiVersion: "v1", kind: "ConfigMap" },
        matchConstraints: rules(["configmaps"]),
        validations: [{ expression: "true" }],
      },
      "spec.paramKind: Forbidden: devkube does not support parameter resources",
    ],
    ["a binding without policyName", VAPB, { validationActions: ["Deny"] }, "spec.policyName: Required value"],
    [
      "a binding with Deny and Warn",
      VAPB,
      { policyName: "p", validationActions: ["Deny", "Warn"] },
      "must not contain both Deny and Warn",
    ],
    [
      "a binding with an unknown action",
      VAPB,
      { policyName: "p", validationActions: ["Block"] },
      `spec.validationActions[0]: Unsupported value: "Block"`,
    ],
  ])("refuses %s (422)", async (_what, path, spec, message) => {
    const kind = path === VAP ? "ValidatingAdmissionPolicy" : "ValidatingAdmissionPolicyBinding";
    const r = await call("POST", path, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind,
      metadata: { name: "bad" },
      spec,
    });
    expect(r.status).toBe(422);
    expect(r.json["message"]).toContain(message);
  });

  it("are not themselves subject to policies (as upstream)", async () => {
    await install("deny-all", {
      matchConstraints: {
        resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"] }],
      },
      validations: [{ expression: "false" }],
    });
    await install("still-possible", { matchConstraints: rules(["configmaps"]), validations: [{ expression: "true" }] });
    expect((await call("DELETE", `${VAP}/still-possible`)).status).toBe(200);
  });
});

describe("Deny", () => {
  it("refuses a CREATE with kube's Status: 422 Invalid by default, the message, and the cause", async () => {
    await install("no-a", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [{ expression: "!has(object.data.a)", message: "data.a is not allowed" }],
    });
    const r = await call("POST", CM("vap-b"), cm("c1"));
    const inner = "ValidatingAdmissionPolicy 'no-a' with binding 'no-a' denied request: data.a is not allowed";
    expect(r.status).toBe(422);
    expect(r.json).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `configmaps "c1" is forbidden: ${inner}`,
      reason: "Invalid",
      details: { name: "c1", kind: "configmaps", causes: [{ message: inner }] },
      code: 422,
    });
    // kubectl prints an Invalid Status from its details (kubectl create prints the message only)
    const k = await h.kubectl(
      ["-n", "vap-b", "apply", "-f", "-"],
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1}\ndata: {a: '1'}\n",
    );
    expect({ code: k.code, stderr: k.stderr }).toEqual({
      code: 1,
      stderr: `The configmaps "c1" is invalid: : ${inner}\n`,
    });
    const created = await h.kubectl(["-n", "vap-b", "create", "configmap", "c1", "--from-literal=a=1"]);
    expect(created.stderr).toBe(`error: failed to create configmap: configmaps "c1" is forbidden: ${inner}\n`);
    expect((await call("POST", CM("vap-b"), { metadata: { name: "c1" }, data: { b: "1" } })).status).toBe(201);
  });

  it("answers 403 Forbidden when the validation's reason is Forbidden, and uses messageExpression", async () => {
    await install("forbid", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [
        {
          expression: "false",
          reason: "Forbidden",
          message: "static",
          messageExpression: "'no ' + request.name + ' in ' + request.namespace",
        },
      ],
    });
    const r = await call("POST", CM("vap-b"), cm("c2"));
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({
      reason: "Forbidden",
      code: 403,
      message: `configmaps "c2" is forbidden: ValidatingAdmissionPolicy 'forbid' with binding 'forbid' denied request: no c2 in vap-b`,
    });
    const k = await h.kubectl(["-n", "vap-b", "create", "configmap", "c2"]);
    expect(k.stderr).toBe(
      `error: failed to create configmap: configmaps "c2" is forbidden: ValidatingAdmissionPolicy 'forbid' with binding 'forbid' denied request: no c2 in vap-b\n`,
    );
  });

  it("falls back to message, then to the expression, when messageExpression fails", async () => {
    await install("fallbacks", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [
        { expression: "object.metadata.name != 'x1'", messageExpression: "object.nope", message: "static message" },
        { expression: "object.metadata.name != 'x2'" },
      ],
    });
    expect((await call("POST", CM("vap-b"), cm("x1"))).json["message"]).toMatch(/denied request: static message$/);
    expect((await call("POST", CM("vap-b"), cm("x2"))).json["message"]).toMatch(
      /denied request: failed expression: object\.metadata\.name != 'x2'$/,
    );
  });

  it("sees oldObject on UPDATE (a transition rule) and object on every write", async () => {
    expect((await call("POST", CM("vap-b"), cm("owned", { labels: { owner: "team-a" } }))).status).toBe(201);
    await install("owner-immutable", {
      matchConstraints: rules(["configmaps"], ["UPDATE"]),
      validations: [
        {
          expression: "oldObject.metadata.labels.owner == object.metadata.labels.owner",
          message: "owner is immutable",
        },
      ],
    });
    const r = await call(
      "PATCH",
      `${CM("vap-b")}/owned`,
      { metadata: { labels: { owner: "team-b" } } },
      { "content-type": "application/merge-patch+json" },
    );
    expect(r.status).toBe(422);
    expect(r.json["message"]).toContain("owner is immutable");
    expect(
      (
        await call(
          "PATCH",
          `${CM("vap-b")}/owned`,
          { data: { a: "2" } },
          { "content-type": "application/merge-patch+json" },
        )
      ).status,
    ).toBe(200);
  });

  it("sees object null and oldObject on DELETE, for a custom resource, and dry runs are judged too", async () => {
    await h.ok(
      ["-n", "vap-b", "apply", "-f", "-"],
      "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: keep}\nspec: {size: 3}\n",
    );
    await install("keep-big", {
      matchConstraints: rules(["widgets"], ["DELETE"]),
      validations: [
        { expression: "object == null && oldObject.spec.size < 3", reason: "Forbidden", message: "big widgets stay" },
      ],
    });
    const dry = await call("DELETE", "/apis/example.com/v1/namespaces/vap-b/widgets/keep?dryRun=All");
    expect(dry.json).toMatchObject({ code: 403, details: { name: "keep", group: "example.com", kind: "widgets" } });
    const k = await h.kubectl(["-n", "vap-b", "delete", "widget", "keep"]);
    expect({ code: k.code, stderr: k.stderr }).toEqual({
      code: 1,
      stderr: `Error from server (Forbidden): widgets.example.com "keep" is forbidden: ValidatingAdmissionPolicy 'keep-big' with binding 'keep-big' denied request: big widgets stay\n`,
    });
    await h.ok(["-n", "vap-b", "patch", "widget", "keep", "--type=merge", "-p", '{"spec":{"size":1}}']);
    await h.ok(["-n", "vap-b", "delete", "widget", "keep"]);
  });

  it("judges a dry-run CREATE, with request.dryRun set", async () => {
    await install("no-dry", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [{ expression: "!request.dryRun" }],
    });
    expect((await call("POST", `${CM("vap-b")}?dryRun=All`, cm("dry"))).status).toBe(422);
    expect((await call("POST", CM("vap-b"), cm("dry"))).status).toBe(201);
  });

  it("applies to cluster-scoped resources, and scope narrows", async () => {
    await install("ns-names", {
      matchConstraints: {
        resourceRules: [
          { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["namespaces"], scope: "Cluster" },
        ],
      },
      validations: [{ expression: "object.metadata.name.startsWith('team-')", message: "namespaces are named team-*" }],
    });
    const r = await h.kubectl(["create", "namespace", "scratch"]);
    expect(r.stderr).toContain(
      `namespaces "scratch" is invalid: : ValidatingAdmissionPolicy 'ns-names' with binding 'ns-names' denied request: namespaces are named team-*`,
    );
    await h.ok(["create", "namespace", "team-x"]);
    await install("namespaced-only", {
      matchConstraints: {
        resourceRules: [
          {
            apiGroups: ["rbac.authorization.k8s.io"],
            apiVersions: ["v1"],
            operations: ["CREATE"],
            resources: ["*"],
            scope: "Namespaced",
          },
        ],
      },
      validations: [{ expression: "false" }],
    });
    await h.ok(["create", "clusterrole", "scoped-out", "--verb=get", "--resource=configmaps"]);
    expect(
      (await h.kubectl(["-n", "vap-b", "create", "role", "scoped-in", "--verb=get", "--resource=configmaps"])).code,
    ).toBe(1);
  });

  it("matches subresources only when the rule names them", async () => {
    await h.ok(
      ["-n", "vap-b", "apply", "-f", "-"],
      "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: st}\nspec: {size: 1}\n",
    );
    await install("status-only", {
      matchConstraints: rules(["widgets/status"], ["UPDATE"]),
      validations: [{ expression: "request.subResource == 'status' && false" }],
    });
    const patch = (sub: string) =>
      call(
        "PATCH",
        `/apis/example.com/v1/namespaces/vap-b/widgets/st${sub}`,
        { status: { ready: true }, spec: { size: 2 } },
        { "content-type": "application/merge-patch+json" },
      );
    expect((await patch("/status")).status).toBe(422);
    expect((await patch("")).status).toBe(200);
  });

  it("judges /scale writes with autoscaling/v1 Scale objects", async () => {
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "web" } },
        template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image: "nginx" }] } },
      },
    };
    expect((await call("POST", "/apis/apps/v1/namespaces/vap-b/deployments", deployment)).status).toBe(201);
    await install("max-scale", {
      matchConstraints: {
        resourceRules: [
          { apiGroups: ["apps"], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["deployments/scale"] },
        ],
      },
      validations: [
        { expression: "object.kind == 'Scale' && object.spec.replicas <= 3", message: "at most 3 replicas" },
      ],
    });
    const r = await h.kubectl(["-n", "vap-b", "scale", "deployment", "web", "--replicas=5"]);
    expect(r.stderr).toContain(
      `The deployments "web" is invalid: : ValidatingAdmissionPolicy 'max-scale' with binding 'max-scale' denied request: at most 3 replicas`,
    );
    await h.ok(["-n", "vap-b", "scale", "deployment", "web", "--replicas=3"]);
  });

  it("matches an equivalent version with matchPolicy Equivalent (converted), and not with Exact", async () => {
    const event = (name: string) => ({
      metadata: { name },
      involvedObject: { kind: "ConfigMap", name: "x", namespace: "vap-b" },
      reason: "Test",
      message: "bad",
      type: "Normal",
    });
    const spec = (matchPolicy: string) => ({
      matchConstraints: {
        matchPolicy,
        resourceRules: [
          { apiGroups: ["events.k8s.io"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["events"] },
        ],
      },
      validations: [
        {
          expression: "object.note != 'bad'",
          messageExpression:
            "'note is bad, seen as ' + request.kind.group + ' for a request to ' + request.requestKind.version",
        },
      ],
    });
    await install("exact", spec("Exact"));
    expect((await call("POST", "/api/v1/namespaces/vap-b/events", event("e1"))).status).toBe(201);
    await install("equivalent", spec("Equivalent"));
    const r = await call("POST", "/api/v1/namespaces/vap-b/events", event("e2"));
    expect(r.json["message"]).toMatch(
      /'equivalent' with binding 'equivalent' denied request: note is bad, seen as events\.k8s\.io for a request to v1$/,
    );
  });

  it("honours namespaceSelector, objectSelector, excludeResourceRules and resourceNames", async () => {
    await install("selectors", {
      matchConstraints: {
        ...rules(["configmaps"], ["CREATE"]),
        namespaceSelector: { matchLabels: { tier: "prod" } },
        objectSelector: { matchExpressions: [{ key: "guarded", operator: "Exists" }] },
      },
      validations: [{ expression: "false" }],
    });
    expect((await call("POST", CM("vap-a"), cm("s1", { labels: { guarded: "y" } }))).status).toBe(422);
    expect((await call("POST", CM("vap-a"), cm("s2"))).status).toBe(201);
    expect((await call("POST", CM("vap-b"), cm("s3", { labels: { guarded: "y" } }))).status).toBe(201);
    await install("names", {
      matchConstraints: {
        ...rules(["configmaps"], ["CREATE"], { resourceNames: ["n1"] }),
        excludeResourceRules: [
          {
            apiGroups: [""],
            apiVersions: ["v1"],
            operations: ["CREATE"],
            resources: ["configmaps"],
            resourceNames: ["n2"],
          },
        ],
      },
      validations: [{ expression: "false" }],
    });
    expect((await call("POST", CM("vap-b"), cm("n1"))).status).toBe(422);
    expect((await call("POST", CM("vap-b"), cm("n3"))).status).toBe(201);
  });

  it("does nothing without a binding, and a binding's matchResources narrows the policy", async () => {
    await install(
      "unbound",
      { matchConstraints: rules(["configmaps"], ["CREATE"]), validations: [{ expression: "false" }] },
      null,
    );
    expect((await call("POST", CM("vap-b"), cm("u1"))).status).toBe(201);
    await install(
      "narrowed",
      { matchConstraints: rules(["configmaps"], ["CREATE"]), validations: [{ expression: "false" }] },
      { validationActions: ["Deny"], matchResources: { namespaceSelector: { matchLabels: { tier: "prod" } } } },
    );
    expect((await call("POST", CM("vap-b"), cm("u2"))).status).toBe(201);
    expect((await call("POST", CM("vap-a"), cm("u2"))).status).toBe(422);
  });

  it("gives request (operation, userInfo, kind, resource) and namespaceObject", async () => {
    await h.ok(["-n", "vap-b", "create", "serviceaccount", "bot"]);
    await h.ok([
      "-n",
      "vap-b",
      "create",
      "rolebinding",
      "bot-edit",
      "--clusterrole=edit",
      "--serviceaccount=vap-b:bot",
    ]);
    await install("who", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [
        {
          expression: "request.userInfo.username != 'system:serviceaccount:vap-b:bot'",
          messageExpression:
            "request.operation + ' ' + request.kind.kind + ' ' + request.resource.resource + ' by ' + request.userInfo.username + ' in ' + namespaceObject.metadata.name + ' (' + string(namespaceObject.status.phase) + ')'",
        },
      ],
    });
    const r = await h.kubectl(["-n", "vap-b", "create", "configmap", "by-bot", "--as=system:serviceaccount:vap-b:bot"]);
    expect(r.stderr).toContain(
      "denied request: CREATE ConfigMap configmaps by system:serviceaccount:vap-b:bot in vap-b (Active)",
    );
    await h.ok(["-n", "vap-b", "create", "configmap", "by-admin"]);
  });
});

describe("matchConditions, variables and failurePolicy", () => {
  it("skips the policy when a matchCondition is false", async () => {
    await install("conditional", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      matchConditions: [
        { name: "only-guarded", expression: "has(object.metadata.labels) && 'guarded' in object.metadata.labels" },
      ],
      validations: [{ expression: "false" }],
    });
    expect((await call("POST", CM("vap-b"), cm("m1"))).status).toBe(201);
    expect((await call("POST", CM("vap-b"), cm("m2", { labels: { guarded: "1" } }))).status).toBe(422);
  });

  it("evaluates variables in order, each seeing the earlier ones", async () => {
    await install("vars", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      variables: [
        { name: "keys", expression: "object.data.size()" },
        { name: "tooMany", expression: "variables.keys > 1" },
      ],
      validations: [
        { expression: "!variables.tooMany", messageExpression: "'at most one key, got ' + string(variables.keys)" },
      ],
    });
    expect((await call("POST", CM("vap-b"), cm("v1"))).status).toBe(201);
    expect(
      (await call("POST", CM("vap-b"), { metadata: { name: "v2" }, data: { a: "1", b: "2" } })).json["message"],
    ).toMatch(/denied request: at most one key, got 2$/);
  });

  it("denies on an expression error under failurePolicy Fail, admits under Ignore", async () => {
    await install("fails", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      validations: [{ expression: "object.spec.replicas > 1" }],
    });
    const r = await call("POST", CM("vap-b"), cm("e1"));
    expect(r.status).toBe(422);
    expect(r.json["message"]).toBe(
      `configmaps "e1" is forbidden: ValidatingAdmissionPolicy 'fails' with binding 'fails' denied request: expression 'object.spec.replicas > 1' resulted in error: no such key: spec`,
    );
    await call("DELETE", VAPB);
    await call("DELETE", VAP);
    await install("ignores", {
      failurePolicy: "Ignore",
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      matchConditions: [{ name: "broken", expression: "object.nope == 1" }],
      variables: [{ name: "v", expression: "object.nope" }],
      validations: [{ expression: "variables.v == 1" }],
    });
    expect((await call("POST", CM("vap-b"), cm("e2"))).status).toBe(201);
  });

  it("fails a validation that reads a variable whose evaluation failed", async () => {
    await install("bad-var", {
      matchConstraints: rules(["configmaps"], ["CREATE"]),
      variables: [{ name: "n", expression: "object.nope" }],
      validations: [{ expression: "variables.n == 1" }],
    });
    expect((await call("POST", CM("vap-b"), cm("e3"))).json["message"]).toContain(
      `expression 'variables.n == 1' resulted in error: composited variable "n" fails to evaluate: expression 'object.nope' resulted in error: no such key: nope`,
    );
  });
});

describe("Warn and Audit", () => {
  it("Warn admits and returns a Warning header that kubectl prints", async () => {
    await install(
      "warn",
      {
        matchConstraints: rules(["configmaps"], ["CREATE"]),
        validations: [{ expression: "false", message: "consider labels" }],
      },
      { validationActions: ["Warn"] },
    );
    const r = await call("POST", CM("vap-b"), cm("w1"));
    expect(r.status).toBe(201);
    expect(r.headers["warning"]).toBe(
      `299 - "Validation failed for ValidatingAdmissionPolicy 'warn' with binding 'warn': consider labels"`,
    );
    const k = await h.kubectl(["-n", "vap-b", "create", "configmap", "w2"]);
    expect({ code: k.code, stderr: k.stderr }).toEqual({
      code: 0,
      stderr: "Warning: Validation failed for ValidatingAdmissionPolicy 'warn' with binding 'warn': consider labels\n",
    });
  });

  it("Audit admits silently (devkube keeps no audit log)", async () => {
    await install(
      "audit",
      { matchConstraints: rules(["configmaps"], ["CREATE"]), validations: [{ expression: "false" }] },
      { validationActions: ["Audit"] },
    );
    const r = await call("POST", CM("vap-b"), cm("a1"));
    expect({ status: r.status, warning: r.headers["warning"] }).toEqual({ status: 201, warning: undefined });
  });
});

describe("controllers", () => {
  it("a namespace whose content a policy refuses to delete stays Terminating until the policy allows it", async () => {
    await h.ok(["create", "namespace", "vap-doomed"]);
    expect((await call("POST", CM("vap-doomed"), cm("precious", { labels: { precious: "true" } }))).status).toBe(201);
    await install("precious", {
      matchConstraints: rules(["configmaps"], ["DELETE"]),
      validations: [
        {
          expression: "!has(oldObject.metadata.labels) || !('precious' in oldObject.metadata.labels)",
          messageExpression: "request.userInfo.username + ' may not'",
        },
      ],
    });
    await h.ok(["delete", "namespace", "vap-doomed", "--wait=false"]);
    await new Promise((r) => setTimeout(r, 300));
    expect((await call("GET", "/api/v1/namespaces/vap-doomed")).json["status"]).toEqual({ phase: "Terminating" });
    expect((await call("GET", `${CM("vap-doomed")}/precious`)).status).toBe(200);
    expect((await call("GET", `${CM("vap-doomed")}/kube-root-ca.crt`)).status).toBe(404);
    await call("DELETE", `${VAPB}/precious`);
    await eventually(async () => (await call("GET", "/api/v1/namespaces/vap-doomed")).status === 404);
  });
});
