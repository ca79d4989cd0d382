import { describe, expect, it } from "vitest";
import { SecretType } from "../../kube/types.ts";
import { DatabaseType } from "../database/schema.ts";
import { mdsWireCodec } from "./wire.ts";

// The operator speaks v1beta1 and works in v1alpha1's spellings: the codec at its client converts both ways.

describe("the operator's wire codec", () => {
  it("addresses the kinds in the storage version, and nothing else", () => {
    expect(mdsWireCodec.onWire(DatabaseType)).toEqual({ ...DatabaseType, version: "v1beta1" });
    expect(mdsWireCodec.onWire(SecretType)).toBe(SecretType);
  });

  it("reads a v1beta1 object in the code's version, a list item without apiVersion included", () => {
    const stored = {
      apiVersion: "mds.dev/v1beta1",
      kind: "Database",
      metadata: { name: "orders" },
      spec: { source: { type: "Database" }, connectionSecret: { endpoint: "Direct" }, branch: { role: "Preview" } },
      status: { credentials: { source: "Namespace" }, newerField: { kept: true } },
    };
    expect(mdsWireCodec.decode(DatabaseType, stored)).toEqual({
      ...stored,
      apiVersion: "mds.dev/v1alpha1",
      spec: { source: { type: "database" }, connectionSecret: { endpoint: "direct" }, branch: { role: "preview" } },
      status: { credentials: { source: "namespace" }, newerField: { kept: true } },
    });
    const { apiVersion: _a, kind: _k, ...item } = stored;
    expect(mdsWireCodec.decode(DatabaseType, item)).toMatchObject({ spec: { source: { type: "database" } } });
  });

  it("keeps a value it does not know as it is (a newer version wrote it)", () => {
    const obj = { apiVersion: "mds.dev/v1beta1", kind: "Database", status: { credentials: { source: "Vault" } } };
    expect(mdsWireCodec.decode(DatabaseType, obj)).toMatchObject({ status: { credentials: { source: "Vault" } } });
  });

  it("writes a merge patch in v1beta1 without adding apiVersion or kind, and a whole object with them", () => {
    expect(mdsWireCodec.encode(DatabaseType, { status: { credentials: { source: "operator" } } })).toEqual({
      status: { credentials: { source: "Operator" } },
    });
    expect(mdsWireCodec.encode(DatabaseType, { metadata: { finalizers: null } })).toEqual({
      metadata: { finalizers: null },
    });
    expect(
      mdsWireCodec.encode(DatabaseType, {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        spec: { connectionSecret: { endpoint: "pooled" } },
      }),
    ).toEqual({ apiVersion: "mds.dev/v1beta1", kind: "Database", spec: { connectionSecret: { endpoint: "Pooled" } } });
  });

  it("leaves other groups' objects and bodies alone", () => {
    const secret = { apiVersion: "v1", kind: "Secret", data: { source: "spec" } };
    expect(mdsWireCodec.decode(SecretType, secret)).toBe(secret);
    expect(mdsWireCodec.encode(SecretType, secret)).toBe(secret);
  });
});
