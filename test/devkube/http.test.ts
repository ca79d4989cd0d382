import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { eventually, startHarness, WIDGET_CRD, type Harness } from "./helpers.ts";

// The wire details clients depend on: Status error bodies, discovery and OpenAPI documents,
// Tables, warnings, watch framing.

let h: Harness;
let agent: Agent;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: Record<string, any>;
}

async function call(
  method: string,
  path: string,
  opts: { body?: unknown; contentType?: string; accept?: string; token?: string | null } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (opts.token !== null) headers["authorization"] = `Bearer ${opts.token ?? h.devkube.token}`;
  if (opts.accept) headers["accept"] = opts.accept;
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers["content-type"] = opts.contentType ?? "application/json";
    body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
  }
  const res = await request(`${h.devkube.url}${path}`, {
    method: method as "GET",
    headers,
    ...(body !== undefined ? { body } : {}),
    dispatcher: agent,
  });
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

beforeAll(async () => {
  h = await startHarness();
  const kubeconfig = parse(h.devkube.kubeconfig) as { clusters: { cluster: Record<string, string> }[] };
  const ca = Buffer.from(kubeconfig.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64").toString();
  agent = new Agent({ connect: { ca } });
  await h.ok(["apply", "-f", "-"], WIDGET_CRD);
});
afterAll(async () => {
  await agent?.close();
  await h?.close();
});

describe("Status errors", () => {
  it.each([
    ["401 without a token", () => call("GET", "/api/v1/namespaces", { token: null }), 401, "Unauthorized"],
    ["401 with a wrong token", () => call("GET", "/api/v1/namespaces", { token: "nope" }), 401, "Unauthorized"],
    ["404 unknown path", () => call("GET", "/apis/nope.example.com/v1/things"), 404, "NotFound"],
    ["404 undeclared subresource", () => call("GET", "/api/v1/namespaces/default/configmaps/x/scale"), 404, "NotFound"],
    [
      "405 POST on an item",
      () => call("POST", "/api/v1/namespaces/default/configmaps/x", { body: {} }),
      405,
      "MethodNotAllowed",
    ],
    ["400 bad label selector", () => call("GET", "/api/v1/configmaps?labelSelector=a%20in%20(", {}), 400, "BadRequest"],
    [
      "400 unsupported field selector",
      () => call("GET", "/api/v1/configmaps?fieldSelector=data.x%3D1"),
      400,
      "BadRequest",
    ],
    [
      "400 body namespace mismatch",
      () =>
        call("POST", "/api/v1/namespaces/default/configmaps", {
          body: { metadata: { name: "m", namespace: "other" } },
        }),
      400,
      "BadRequest",
    ],
    [
      "404 patch of a missing object",
      () =>
        call("PATCH", "/apis/example.com/v1/namespaces/default/widgets/x", {
          body: {},
          contentType: "application/merge-patch+json",
        }),
      404,
      "NotFound",
    ],
    [
      "422 invalid name",
      () => call("POST", "/api/v1/namespaces/default/configmaps", { body: { metadata: { name: "Bad_Name" } } }),
      422,
      "Invalid",
    ],
  ])("%s", async (_name, fn, code, reason) => {
    const r = await fn();
    expect(r.status).toBe(code);
    expect(r.headers["content-type"]).toBe("application/json");
    expect(r.json).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason });
  });

  it("415 for strategic merge patch on an existing CR, 409 AlreadyExists and Conflict with details", async () => {
    await call("POST", "/apis/example.com/v1/namespaces/default/widgets", {
      body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "e1" }, spec: {} },
    });
    const smp = await call("PATCH", "/apis/example.com/v1/namespaces/default/widgets/e1", {
      body: {},
      contentType: "application/strategic-merge-patch+json",
    });
    expect(smp.json).toMatchObject({ code: 415, reason: "UnsupportedMediaType" });
    const dup = await call("POST", "/apis/example.com/v1/namespaces/default/widgets", {
      body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "e1" }, spec: {} },
    });
    expect(dup.json).toMatchObject({
      code: 409,
      reason: "AlreadyExists",
      details: { name: "e1", group: "example.com", kind: "widgets" },
      message: 'widgets.example.com "e1" already exists',
    });
    const stale = await call("PATCH", "/apis/example.com/v1/namespaces/default/widgets/e1", {
      body: { metadata: { resourceVersion: "1" } },
      contentType: "application/merge-patch+json",
    });
    expect(stale.json).toMatchObject({ code: 409, reason: "Conflict" });
    expect(stale.json["message"]).toContain("the object has been modified");
    const bad = await call("PATCH", "/apis/example.com/v1/namespaces/default/widgets/e1", {
      body: { spec: { size: "x" } },
      contentType: "application/merge-patch+json",
    });
    expect(bad.json).toMatchObject({
      code: 422,
      reason: "Invalid",
      details: { kind: "Widget", group: "example.com", name: "e1" },
    });
    expect(bad.json["details"].causes[0].field).toBe("spec.size");
    const del = await call("DELETE", "/apis/example.com/v1/namespaces/default/widgets/e1");
    expect(del.json).toMatchObject({
      kind: "Status",
      status: "Success",
      details: { name: "e1", group: "example.com", kind: "widgets" },
    });
  });

  it("warns about unknown fields when fieldValidation is Warn (the default)", async () => {
    const r = await call("POST", "/apis/example.com/v1/namespaces/default/widgets", {
      body: { apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "warn" }, spec: { size: 1, typo: true } },
    });
    expect(r.status).toBe(201);
    expect(String(r.headers["warning"])).toContain('299 - "unknown field \\"spec.typo\\""');
    expect(r.json["spec"]).toEqual({ size: 1 });
  });
});

describe("discovery and OpenAPI", () => {
  it("serves aggregated discovery with its content type, and legacy documents", async () => {
    const agg = await call("GET", "/apis", {
      accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    });
    expect(agg.headers["content-type"]).toBe("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    const group = agg.json["items"].find((g: { metadata: { name: string } }) => g.metadata.name === "example.com");
    expect(group.versions[0].resources[0]).toMatchObject({
      resource: "widgets",
      scope: "Namespaced",
      shortNames: ["wg"],
      subresources: [{ subresource: "status" }],
    });
    const legacy = await call("GET", "/apis/example.com/v1");
    expect(legacy.json["resources"].map((r: { name: string }) => r.name)).toEqual(["widgets", "widgets/status"]);
    expect((await call("GET", "/api")).json).toMatchObject({ kind: "APIVersions", versions: ["v1"] });
    expect((await call("GET", "/healthz", { token: null })).text).toBe("ok");
  });

  it("works with kubectl through the legacy discovery fan-out", async () => {
    const legacy = await startHarness({ aggregatedDiscovery: false });
    try {
      await legacy.ok(["apply", "-f", "-"], WIDGET_CRD);
      expect(await legacy.ok(["api-resources"])).toMatch(/widgets\s+wg\s+example.com\/v1/);
    } finally {
      await legacy.close();
    }
  });

  it("serves OpenAPI v3 with fieldValidation on PATCH operations and 404 for v2", async () => {
    const root = await call("GET", "/openapi/v3");
    const url = root.json["paths"]["api/v1"].serverRelativeURL as string;
    expect(url).toMatch(/^\/openapi\/v3\/api\/v1\?hash=[0-9A-F]+$/);
    const doc = await call("GET", url);
    const patch = doc.json["paths"]["/api/v1/namespaces/{name}"].patch;
    expect(patch["x-kubernetes-group-version-kind"]).toEqual({ group: "", version: "v1", kind: "Namespace" });
    expect(patch.parameters.map((p: { name: string }) => p.name)).toContain("fieldValidation");
    expect((await call("GET", "/openapi/v2")).status).toBe(404);
  });
});

describe("tables and watches", () => {
  const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

  it("answers Table lists with column definitions, a resourceVersion and partial metadata rows", async () => {
    const t = await call("GET", "/api/v1/namespaces", { accept: tableAccept });
    expect(t.headers["content-type"]).toBe("application/json;as=Table;v=v1;g=meta.k8s.io");
    expect(t.json["columnDefinitions"].map((c: { name: string }) => c.name)).toEqual(["Name", "Status", "Age"]);
    expect(t.json["metadata"].resourceVersion).toMatch(/^\d+$/);
    expect(t.json["rows"][0].object.kind).toBe("PartialObjectMetadata");
  });

  it("streams Table watch events with headers only in the first", async () => {
    const res = await request(`${h.devkube.url}/api/v1/namespaces?watch=true&timeoutSeconds=1`, {
      headers: { authorization: `Bearer ${h.devkube.token}`, accept: tableAccept },
      dispatcher: agent,
    });
    const lines = (await res.body.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; object: { kind: string; columnDefinitions: unknown[] } });
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.every((l) => l.type === "ADDED" && l.object.kind === "Table")).toBe(true);
    expect(lines[0]?.object.columnDefinitions.length).toBe(3);
    expect(lines[1]?.object.columnDefinitions.length ?? 0).toBe(0);
  });

  it("waits for a resourceVersion newer than the store, then answers 504 ResourceVersionTooLarge", async () => {
    const current = Number((await call("GET", "/api/v1/namespaces")).json["metadata"].resourceVersion);
    const res = await request(`${h.devkube.url}/api/v1/namespaces?watch=true&resourceVersion=${current + 1000}`, {
      headers: { authorization: `Bearer ${h.devkube.token}` },
      dispatcher: agent,
    });
    const lines = (await res.body.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; object: Record<string, unknown> });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ type: "ERROR", object: { code: 504, reason: "Timeout" } });
  });

  it("answers WatchList requests with initial events and an initial-events-end bookmark", async () => {
    const res = await request(
      `${h.devkube.url}/api/v1/namespaces?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1`,
      { headers: { authorization: `Bearer ${h.devkube.token}` }, dispatcher: agent },
    );
    const lines = (await res.body.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; object: { metadata: { annotations?: Record<string, string> } } });
    const end = lines.findIndex(
      (l) => l.type === "BOOKMARK" && l.object.metadata.annotations?.["k8s.io/initial-events-end"] === "true",
    );
    expect(end).toBeGreaterThan(3);
    expect(lines.slice(0, end).every((l) => l.type === "ADDED")).toBe(true);
    const refused = await call("GET", "/api/v1/namespaces?watch=true&sendInitialEvents=true");
    expect(refused.json).toMatchObject({ code: 422, reason: "Invalid" });
  });

  it("lists built-in items without kind and apiVersion, CR items with them, never items: null", async () => {
    const none = await call("GET", "/api/v1/namespaces/kube-public/configmaps?labelSelector=nothing%3Dhere");
    expect(none.json).toMatchObject({ kind: "ConfigMapList", apiVersion: "v1", items: [] });
    await call("POST", "/api/v1/namespaces/default/configmaps", { body: { metadata: { name: "k" } } });
    const withItem = await call("GET", "/api/v1/namespaces/default/configmaps");
    expect(withItem.json["items"][0].kind).toBeUndefined();
    const ws = await call("GET", "/apis/example.com/v1/widgets");
    expect(ws.json["items"][0].kind).toBe("Widget");
  });

  it("gives every namespace a default ServiceAccount and the kube-root-ca.crt ConfigMap, re-created when deleted", async () => {
    await call("POST", "/api/v1/namespaces", { body: { metadata: { name: "fresh" } } });
    await eventually(
      async () => (await call("GET", "/api/v1/namespaces/fresh/serviceaccounts/default")).status === 200,
    );
    const ca = await call("GET", "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt");
    expect(ca.json["data"]["ca.crt"]).toContain("BEGIN CERTIFICATE");
    await call("DELETE", "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt");
    await eventually(
      async () => (await call("GET", "/api/v1/namespaces/fresh/configmaps/kube-root-ca.crt")).status === 200,
    );
  });

  it("deletes collections by selector", async () => {
    for (const n of ["dc1", "dc2"])
      await call("POST", "/api/v1/namespaces/default/configmaps", {
        body: { metadata: { name: n, labels: { batch: "x" } } },
      });
    const r = await call("DELETE", "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dx");
    expect(r.status).toBe(200);
    expect((await call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=batch%3Dx")).json["items"]).toEqual(
      [],
    );
  });
});
