// The schema and patch libraries together, as devkube chains them for a custom resource write:
// apply -> prune -> default -> validate, with list types taken from the CRD schema.
import { describe, expect, it } from "vitest";
import { compileSchema, formatFieldError } from "../schema/index.ts";
import { applyMergePatch, serverSideApply } from "./index.ts";

const schema = compileSchema({
  type: "object",
  properties: {
    spec: {
      type: "object",
      required: ["region"],
      "x-kubernetes-validations": [
        {
          rule: "has(self.projectRef) != has(self.projectId)",
          message: "exactly one of projectRef or projectId must be set",
        },
      ],
      properties: {
        region: {
          type: "string",
          "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "region is immutable" }],
        },
        projectId: { type: "string" },
        projectRef: { type: "object", properties: { name: { type: "string" } } },
        deletionPolicy: { type: "string", enum: ["Retain", "Delete"], default: "Delete" },
      },
    },
    status: {
      type: "object",
      properties: {
        conditions: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["type"],
          items: {
            type: "object",
            required: ["type", "status"],
            properties: { type: { type: "string" }, status: { type: "string" }, reason: { type: "string" } },
          },
        },
      },
    },
  },
});

const db = (spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name: "orders", namespace: "default" },
  spec,
});
const T = "2026-11-21T08:00:00Z";

function write(
  obj: Record<string, unknown>,
  old?: Record<string, unknown>,
): { object: Record<string, unknown>; errors: string[]; unknown: string[] } {
  const pruned = schema.prune(obj);
  const defaulted = schema.applyDefaults(pruned.object);
  return {
    object: defaulted,
    errors: schema.validate(defaulted, old).map(formatFieldError),
    unknown: pruned.unknownFields,
  };
}

describe("custom resource write pipeline", () => {
  it("create via SSA: pruned, defaulted, valid", () => {
    const applied = serverSideApply({
      live: undefined,
      applied: db({ region: "eu-central-1", projectId: "p1", typo: 1 }),
      manager: "mds",
      force: false,
      now: T,
    }).object;
    const r = write(applied);
    expect(r.unknown).toEqual(["spec.typo"]);
    expect(r.errors).toEqual([]);
    expect(r.object["spec"]).toEqual({ region: "eu-central-1", projectId: "p1", deletionPolicy: "Delete" });
  });

  it("update via merge patch: immutable region and exactly-one-of", () => {
    const old = write(db({ region: "eu-central-1", projectId: "p1" })).object;
    const patched = applyMergePatch(old, { spec: { region: "us-east-1", projectRef: { name: "x" } } }) as Record<
      string,
      unknown
    >;
    expect(write(patched, old).errors).toEqual([
      'spec: Invalid value: "object": exactly one of projectRef or projectId must be set',
      'spec.region: Invalid value: "string": region is immutable',
    ]);
  });

  it("status conditions applied by two managers merge by type using the schema's list type", () => {
    const live = write(db({ region: "eu", projectId: "p" })).object;
    const listTypes = (p: string[]): ReturnType<typeof schema.listTypes> => schema.listTypes(p);
    const a = serverSideApply({
      live,
      applied: { ...db({}), status: { conditions: [{ type: "Ready", status: "False", reason: "Creating" }] } },
      manager: "mds",
      force: false,
      subresource: "status",
      now: T,
      listTypes,
    }).object;
    const b = serverSideApply({
      live: a,
      applied: { ...db({}), status: { conditions: [{ type: "Synced", status: "True" }] } },
      manager: "other",
      force: false,
      subresource: "status",
      now: T,
      listTypes,
    }).object;
    const c = serverSideApply({
      live: b,
      applied: { ...db({}), status: { conditions: [{ type: "Ready", status: "True" }] } },
      manager: "mds",
      force: false,
      subresource: "status",
      now: T,
      listTypes,
    }).object;
    expect(c["status"]).toEqual({
      conditions: [
        { type: "Ready", status: "True" },
        { type: "Synced", status: "True" },
      ],
    });
    expect(write(c, live).errors).toEqual([]);
  });
});
