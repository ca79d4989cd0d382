import { describe, expect, it } from "vitest";
import { PatchError, applyJsonPatch, applyMergePatch, applyStrategicMergePatch } from "./index.ts";

function caught(fn: () => unknown): PatchError {
  try {
    fn();
  } catch (err) {
    if (err instanceof PatchError) return err;
    throw err;
  }
  throw new Error("expected a PatchError");
}

describe("applyMergePatch (RFC 7386)", () => {
  it.each([
    [{ a: "b" }, { a: "c" }, { a: "c" }],
    [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
    [{ a: "b" }, { a: null }, {}],
    [{ a: ["b"] }, { a: ["c", "d"] }, { a: ["c", "d"] }],
    [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
    [{ a: "x" }, { a: { b: null, c: 1 } }, { a: { c: 1 } }],
    [{ a: 1 }, ["x"], ["x"]],
  ])("%j + %j", (target, patch, want) => {
    expect(applyMergePatch(target, patch)).toEqual(want);
  });
  it("does not modify its inputs", () => {
    const t = { a: { b: 1 } };
    applyMergePatch(t, { a: { b: 2 } });
    expect(t).toEqual({ a: { b: 1 } });
  });
});

describe("applyJsonPatch (RFC 6902)", () => {
  const doc = { metadata: { name: "x", labels: { a: "1" } }, spec: { list: [1, 2] } };
  it.each([
    [
      [{ op: "add", path: "/metadata/labels/b", value: "2" }],
      { ...doc, metadata: { name: "x", labels: { a: "1", b: "2" } } },
    ],
    [[{ op: "add", path: "/spec/list/-", value: 3 }], { ...doc, spec: { list: [1, 2, 3] } }],
    [[{ op: "add", path: "/spec/list/0", value: 0 }], { ...doc, spec: { list: [0, 1, 2] } }],
    [[{ op: "remove", path: "/spec/list/0" }], { ...doc, spec: { list: [2] } }],
    [[{ op: "replace", path: "/metadata/name", value: "y" }], { ...doc, metadata: { name: "y", labels: { a: "1" } } }],
    [
      [{ op: "move", from: "/metadata/labels/a", path: "/metadata/labels/z" }],
      { ...doc, metadata: { name: "x", labels: { z: "1" } } },
    ],
    [[{ op: "copy", from: "/metadata/name", path: "/spec/name" }], { ...doc, spec: { list: [1, 2], name: "x" } }],
    [
      [
        { op: "test", path: "/metadata/name", value: "x" },
        { op: "add", path: "/metadata/labels/a~1b", value: "c" },
      ],
      { ...doc, metadata: { name: "x", labels: { a: "1", "a/b": "c" } } },
    ],
  ])("%j", (ops, want) => {
    expect(applyJsonPatch(doc, ops)).toEqual(want);
  });
  it.each([
    [
      "missing parent is not created",
      [{ op: "add", path: "/metadata/finalizers/-", value: "f" }],
      422,
      'add operation does not apply: doc is missing path: "/metadata/finalizers/-": missing value',
    ],
    [
      "failed test",
      [{ op: "test", path: "/metadata/name", value: "z" }],
      422,
      "testing value /metadata/name failed: test failed",
    ],
    [
      "remove missing",
      [{ op: "remove", path: "/spec/nope" }],
      422,
      'remove operation does not apply: doc is missing path: "/spec/nope": missing value',
    ],
    [
      "replace missing",
      [{ op: "replace", path: "/spec/nope", value: 1 }],
      422,
      "replace operation does not apply: doc is missing key: /spec/nope: missing value",
    ],
    [
      "index out of range",
      [{ op: "add", path: "/spec/list/5", value: 1 }],
      422,
      'add operation does not apply: index out of bounds: 5 in "/spec/list/5"',
    ],
    ["unknown op", [{ op: "frobnicate", path: "/a" }], 422, "Unexpected kind: frobnicate"],
    ["missing path", [{ op: "add", value: 1 }], 422, "add operation missing path field"],
    ["list of non-objects", [1], 400, "json: cannot unmarshal into Go value of type jsonpatch.Operation"],
    ["not a list", { op: "add" }, 400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"],
  ])("%s", (_n, ops, status, detail) => {
    const err = caught(() => applyJsonPatch(doc, ops));
    if (status === 400) expect([err.status, err.reason, err.message]).toEqual([400, "BadRequest", detail]);
    else {
      // kube-apiserver answers every JSON patch that does not apply with this generic 422 and no causes
      expect([err.status, err.reason, err.message, err.causes]).toEqual([
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        undefined,
      ]);
      expect((err.cause as Error).message).toBe(detail);
    }
  });
  it("is atomic: a failing op leaves the target untouched", () => {
    const t = { a: 1 };
    caught(() =>
      applyJsonPatch(t, [
        { op: "add", path: "/b", value: 2 },
        { op: "test", path: "/a", value: 2 },
      ]),
    );
    expect(t).toEqual({ a: 1 });
  });
});

describe("applyStrategicMergePatch", () => {
  it("kubectl apply on a ServiceAccount: finalizers [a,b] -> [b,c], imagePullSecrets replaced (trace apply-sa-change)", () => {
    const live = {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: {
        name: "sa1",
        namespace: "default",
        finalizers: ["a.example.com/x", "b.example.com/y"],
        annotations: { x: "1" },
      },
      imagePullSecrets: [{ name: "s1" }, { name: "s2" }],
      secrets: [{ name: "t1" }],
    };
    const patch = {
      imagePullSecrets: [{ name: "s2" }, { name: "s3" }],
      metadata: {
        "$deleteFromPrimitiveList/finalizers": ["a.example.com/x"],
        "$setElementOrder/finalizers": ["b.example.com/y", "c.example.com/z"],
        finalizers: ["c.example.com/z"],
        annotations: { x: "2" },
      },
    };
    expect(applyStrategicMergePatch(live, patch, "v1/ServiceAccount")).toEqual({
      ...live,
      metadata: { ...live.metadata, finalizers: ["b.example.com/y", "c.example.com/z"], annotations: { x: "2" } },
      imagePullSecrets: [{ name: "s2" }, { name: "s3" }],
    });
  });

  it("kubectl apply on a ConfigMap: null deletes, maps merge (trace apply-cm-change)", () => {
    const live = { metadata: { name: "cm1", labels: { app: "demo" } }, data: { a: "1", b: "2" } };
    const patch = { data: { b: null, c: "3" }, metadata: { labels: { app: "demo2" } } };
    expect(applyStrategicMergePatch(live, patch, "v1/ConfigMap")).toEqual({
      metadata: { name: "cm1", labels: { app: "demo2" } },
      data: { a: "1", c: "3" },
    });
  });

  const sa = {
    metadata: {
      name: "x",
      ownerReferences: [
        { uid: "u1", name: "a" },
        { uid: "u2", name: "b" },
      ],
    },
    secrets: [{ name: "s1", namespace: "n" }, { name: "s2" }],
  };
  it.each([
    [
      "merge list by key",
      { secrets: [{ name: "s1", namespace: "m" }, { name: "s3" }] },
      { ...sa, secrets: [{ name: "s1", namespace: "m" }, { name: "s2" }, { name: "s3" }] },
    ],
    [
      "$patch delete in a merge list",
      { secrets: [{ name: "s1", $patch: "delete" }] },
      { ...sa, secrets: [{ name: "s2" }] },
    ],
    [
      "$patch replace in a merge list",
      { secrets: [{ $patch: "replace" }, { name: "s9" }] },
      { ...sa, secrets: [{ name: "s9" }] },
    ],
    [
      "ownerReferences merge by uid for any kind",
      { metadata: { ownerReferences: [{ uid: "u2", name: "B" }] } },
      {
        ...sa,
        metadata: {
          name: "x",
          ownerReferences: [
            { uid: "u1", name: "a" },
            { uid: "u2", name: "B" },
          ],
        },
      },
    ],
    ["$patch replace on a map", { metadata: { $patch: "replace", name: "y" } }, { ...sa, metadata: { name: "y" } }],
    [
      "$patch delete on a map",
      { metadata: { ownerReferences: [{ uid: "u1", $patch: "delete" }] }, secrets: null },
      { metadata: { name: "x", ownerReferences: [{ uid: "u2", name: "b" }] } },
    ],
    ["$retainKeys", { metadata: { $retainKeys: ["name"], name: "x" } }, { ...sa, metadata: { name: "x" } }],
    [
      "$setElementOrder on a keyed list",
      { "$setElementOrder/secrets": [{ name: "s2" }, { name: "s1" }] },
      { ...sa, secrets: [{ name: "s2" }, { name: "s1", namespace: "n" }] },
    ],
  ])("%s", (_n, patch, want) => {
    expect(applyStrategicMergePatch(sa, patch, "v1/ServiceAccount")).toEqual(want);
  });

  it("treats lists of unknown kinds as atomic, except metadata lists", () => {
    const live = { metadata: { finalizers: ["a"] }, spec: { items: [1, 2] } };
    expect(
      applyStrategicMergePatch(
        live,
        { metadata: { finalizers: ["b"] }, spec: { items: [3] } },
        "mds.dev/v1alpha1/Database",
      ),
    ).toEqual({ metadata: { finalizers: ["a", "b"] }, spec: { items: [3] } });
  });

  it("rejects unknown $patch values and list items without the merge key with 400", () => {
    expect(
      caught(() => applyStrategicMergePatch(sa, { metadata: { $patch: "explode" } }, "v1/ServiceAccount")).status,
    ).toBe(400);
    expect(
      caught(() => applyStrategicMergePatch(sa, { secrets: [{ namespace: "x" }] }, "v1/ServiceAccount")).status,
    ).toBe(400);
    expect(caught(() => applyStrategicMergePatch(sa, ["x"], "v1/ServiceAccount")).status).toBe(400);
    expect(
      caught(() =>
        applyStrategicMergePatch(sa, { metadata: { "$deleteFromPrimitiveList/finalizers": "a" } }, "v1/ServiceAccount"),
      ).message,
    ).toBe("invalid patch format of primitive list");
    expect(
      caught(() => applyStrategicMergePatch(sa, { "$setElementOrder/secrets": {} }, "v1/ServiceAccount")).message,
    ).toBe("invalid patch format of setElementOrder list");
    expect(
      caught(() =>
        applyStrategicMergePatch(sa, { metadata: { $retainKeys: ["name"], labels: {} } }, "v1/ServiceAccount"),
      ).status,
    ).toBe(422);
  });
});
