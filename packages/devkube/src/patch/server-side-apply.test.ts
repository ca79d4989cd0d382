import { describe, expect, it } from "vitest";
import { PatchError, recordUpdate, serverSideApply } from "./index.ts";

const T1 = "2026-11-21T08:00:00Z";
const T2 = "2026-11-21T09:00:00Z";
const T3 = "2026-11-21T10:00:00Z";

const widget = (
  spec: Record<string, unknown>,
  labels: Record<string, string> = { app: "demo" },
): Record<string, unknown> => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name: "w1", namespace: "default", labels },
  spec,
});

type Obj = Record<string, unknown>;
const meta = (o: Obj): Obj => o["metadata"] as Obj;
const managed = (o: Obj): Obj[] => (meta(o)["managedFields"] ?? []) as Obj[];

function conflict(fn: () => unknown): PatchError {
  try {
    fn();
  } catch (err) {
    if (err instanceof PatchError) return err;
    throw err;
  }
  throw new Error("expected a conflict");
}

/** What the server stores after a create: server metadata added. */
function created(o: Obj): Obj {
  return { ...o, metadata: { ...meta(o), uid: "u-1", resourceVersion: "5", creationTimestamp: T1, generation: 1 } };
}

describe("serverSideApply", () => {
  const first = serverSideApply({
    live: undefined,
    applied: widget({ color: "red", size: 3 }),
    manager: "kubectl",
    force: false,
    now: T1,
  }).object;

  it("creates the object and records an Apply entry like kube (trace ssa-widget)", () => {
    expect(first["spec"]).toEqual({ color: "red", size: 3 });
    expect(managed(first)).toEqual([
      {
        manager: "kubectl",
        operation: "Apply",
        apiVersion: "example.com/v1",
        time: T1,
        fieldsType: "FieldsV1",
        fieldsV1: { "f:metadata": { "f:labels": { "f:app": {} } }, "f:spec": { "f:color": {}, "f:size": {} } },
      },
    ]);
  });

  it("removes fields the applier dropped from its configuration", () => {
    const next = serverSideApply({
      live: created(first),
      applied: widget({ color: "red" }, {}),
      manager: "kubectl",
      force: false,
      now: T2,
    }).object;
    expect(next["spec"]).toEqual({ color: "red" });
    expect(meta(next)["labels"]).toEqual({});
    expect(meta(next)["uid"]).toBe("u-1");
    expect(managed(next)[0]?.["fieldsV1"]).toEqual({ "f:metadata": { "f:labels": {} }, "f:spec": { "f:color": {} } });
  });

  it("keeps the time of an unchanged re-apply", () => {
    const same = serverSideApply({
      live: created(first),
      applied: widget({ color: "red", size: 3 }),
      manager: "kubectl",
      force: false,
      now: T2,
    }).object;
    expect(managed(same)[0]?.["time"]).toBe(T1);
  });

  describe("with another manager owning spec.size", () => {
    const patched = recordUpdate({
      old: created(first),
      updated: { ...created(first), spec: { color: "red", size: 5 } },
      manager: "kubectl-patch",
      operation: "Update",
      now: T2,
    });

    it("recordUpdate moves the changed field to the updater", () => {
      expect(managed(patched).map((m) => [m["manager"], m["operation"], m["fieldsV1"]])).toEqual([
        ["kubectl", "Apply", { "f:metadata": { "f:labels": { "f:app": {} } }, "f:spec": { "f:color": {} } }],
        ["kubectl-patch", "Update", { "f:spec": { "f:size": {} } }],
      ]);
    });

    it("conflicts when an apply changes it (message and causes exactly like kube)", () => {
      const err = conflict(() =>
        serverSideApply({
          live: patched,
          applied: widget({ color: "red", size: 7 }),
          manager: "kubectl",
          force: false,
          now: T3,
        }),
      );
      expect(err.status).toBe(409);
      expect(err.reason).toBe("Conflict");
      expect(err.message).toBe(
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using example.com/v1: .spec.size',
      );
      expect(err.causes).toEqual([
        {
          type: "FieldManagerConflict",
          message: 'conflict with "kubectl-patch" using example.com/v1',
          field: ".spec.size",
        },
      ]);
    });

    it("does not conflict when the value is the same; ownership is then shared", () => {
      const o = serverSideApply({
        live: patched,
        applied: widget({ color: "red", size: 5 }),
        manager: "kubectl",
        force: false,
        now: T3,
      }).object;
      expect(managed(o).map((m) => [m["manager"], m["fieldsV1"]])).toEqual([
        ["kubectl", { "f:metadata": { "f:labels": { "f:app": {} } }, "f:spec": { "f:color": {}, "f:size": {} } }],
        ["kubectl-patch", { "f:spec": { "f:size": {} } }],
      ]);
      // dropping the shared field from the apply keeps the value: someone else still owns it
      const o2 = serverSideApply({
        live: o,
        applied: widget({ color: "red" }),
        manager: "kubectl",
        force: false,
        now: T3,
      }).object;
      expect(o2["spec"]).toEqual({ color: "red", size: 5 });
    });

    it("force moves ownership (trace ssa-widget-force)", () => {
      const o = serverSideApply({
        live: patched,
        applied: widget({ size: 9 }, {}),
        manager: "me",
        force: true,
        now: T3,
      }).object;
      expect(o["spec"]).toEqual({ color: "red", size: 9 });
      expect(managed(o).map((m) => [m["manager"], m["operation"], m["fieldsV1"]])).toEqual([
        ["kubectl", "Apply", { "f:metadata": { "f:labels": { "f:app": {} } }, "f:spec": { "f:color": {} } }],
        ["me", "Apply", { "f:metadata": { "f:labels": {} }, "f:spec": { "f:size": {} } }],
      ]);
    });

    it("lists several conflicts grouped by manager", () => {
      const err = conflict(() =>
        serverSideApply({
          live: patched,
          applied: widget({ color: "blue", size: 7 }),
          manager: "other",
          force: false,
          now: T3,
        }),
      );
      expect(err.message).toBe(
        'Apply failed with 2 conflicts: conflicts with "kubectl":\n- .spec.color\nconflicts with "kubectl-patch" using example.com/v1:\n- .spec.size',
      );
    });
  });

  it("an Update entry of the same manager name is a different owner", () => {
    const upd = recordUpdate({
      old: created(first),
      updated: { ...created(first), spec: { color: "red", size: 4 } },
      manager: "kubectl",
      operation: "Update",
      now: T2,
    });
    const err = conflict(() =>
      serverSideApply({
        live: upd,
        applied: widget({ color: "red", size: 6 }),
        manager: "kubectl",
        force: false,
        now: T3,
      }),
    );
    expect(err.message).toBe('Apply failed with 1 conflict: conflict with "kubectl" using example.com/v1: .spec.size');
  });

  it("gives an object without managedFields to before-first-apply", () => {
    const bare = created(widget({ color: "red", size: 3 }));
    const o = serverSideApply({
      live: bare,
      applied: widget({ color: "red" }),
      manager: "kubectl",
      force: false,
      now: T2,
    }).object;
    expect(managed(o).map((m) => m["manager"])).toEqual(["kubectl", "before-first-apply"]);
    const err = conflict(() =>
      serverSideApply({ live: bare, applied: widget({ size: 4 }), manager: "kubectl", force: false, now: T2 }),
    );
    expect(err.message).toBe(
      'Apply failed with 1 conflict: conflict with "before-first-apply" using example.com/v1: .spec.size',
    );
  });

  it("merges finalizers as a set and ownerReferences by uid between managers", () => {
    const base = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", finalizers: ["a"], ownerReferences: [{ uid: "u1", name: "o1" }] },
    };
    const a = serverSideApply({ live: undefined, applied: base, manager: "a", force: false, now: T1 }).object;
    const b = serverSideApply({
      live: a,
      applied: { ...base, metadata: { name: "c", finalizers: ["b"], ownerReferences: [{ uid: "u2", name: "o2" }] } },
      manager: "b",
      force: false,
      now: T2,
    }).object;
    expect(meta(b)["finalizers"]).toEqual(["a", "b"]);
    expect(meta(b)["ownerReferences"]).toEqual([
      { uid: "u1", name: "o1" },
      { uid: "u2", name: "o2" },
    ]);
    expect(managed(b).find((m) => m["manager"] === "b")?.["fieldsV1"]).toEqual({
      "f:metadata": {
        "f:finalizers": { 'v:"b"': {} },
        "f:ownerReferences": { 'k:{"uid":"u2"}': { ".": {}, "f:name": {}, "f:uid": {} } },
      },
    });
    const a2 = serverSideApply({
      live: b,
      applied: { ...base, metadata: { name: "c" } },
      manager: "a",
      force: false,
      now: T3,
    }).object;
    expect(meta(a2)["finalizers"]).toEqual(["b"]);
    expect(meta(a2)["ownerReferences"]).toEqual([{ uid: "u2", name: "o2" }]);
  });

  it("status subresource applies merge and own only status; conditions are keyed by type", () => {
    const obj = created(first);
    const s1 = serverSideApply({
      live: obj,
      applied: { ...widget({ color: "green" }), status: { conditions: [{ type: "Ready", status: "True" }] } },
      manager: "controller",
      force: false,
      subresource: "status",
      now: T2,
    }).object;
    expect(s1["spec"]).toEqual({ color: "red", size: 3 });
    const s2 = serverSideApply({
      live: s1,
      applied: {
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "w1" },
        status: { conditions: [{ type: "Synced", status: "False" }] },
      },
      manager: "other",
      force: false,
      subresource: "status",
      now: T3,
    }).object;
    expect(s2["status"]).toEqual({
      conditions: [
        { type: "Ready", status: "True" },
        { type: "Synced", status: "False" },
      ],
    });
    const ctrl = managed(s2).find((m) => m["manager"] === "controller");
    expect(ctrl).toMatchObject({
      operation: "Apply",
      subresource: "status",
      fieldsV1: { "f:status": { "f:conditions": { 'k:{"type":"Ready"}': { ".": {}, "f:status": {}, "f:type": {} } } } },
    });
  });

  it("ignoreStatus: a main-resource apply neither merges nor owns status", () => {
    const o = serverSideApply({
      live: created(first),
      applied: { ...widget({ color: "red", size: 3 }), status: { phase: "x" } },
      manager: "kubectl",
      force: false,
      now: T2,
      ignoreStatus: true,
    }).object;
    expect(o["status"]).toBeUndefined();
    expect(managed(o)[0]?.["fieldsV1"]).toEqual({
      "f:metadata": { "f:labels": { "f:app": {} } },
      "f:spec": { "f:color": {}, "f:size": {} },
    });
  });

  it("rejects managedFields in the applied configuration (400)", () => {
    const applied = { ...widget({}), metadata: { name: "w1", managedFields: [] } };
    const err = conflict(() => serverSideApply({ live: undefined, applied, manager: "m", force: false, now: T1 }));
    expect([err.status, err.reason, err.message]).toEqual([400, "BadRequest", "metadata.managedFields must be nil"]);
  });

  it("uses listTypes from the CRD schema (set vs atomic)", () => {
    const listTypes = (p: string[]): { type: "set" } | undefined =>
      p.join(".") === "spec.tags" ? { type: "set" } : undefined;
    const a = serverSideApply({
      live: undefined,
      applied: widget({ tags: ["x"], plain: [1] }),
      manager: "a",
      force: false,
      now: T1,
      listTypes,
    }).object;
    const b = serverSideApply({
      live: a,
      applied: widget({ tags: ["y"] }, {}),
      manager: "b",
      force: false,
      now: T2,
      listTypes,
    }).object;
    expect((b["spec"] as Obj)["tags"]).toEqual(["x", "y"]);
    const err = conflict(() =>
      serverSideApply({ live: a, applied: widget({ plain: [2] }, {}), manager: "b", force: false, now: T2, listTypes }),
    );
    expect(err.message).toBe('Apply failed with 1 conflict: conflict with "a": .spec.plain');
  });
});

describe("recordUpdate", () => {
  it("on create the manager owns every field but identity and server metadata", () => {
    const o = recordUpdate({
      old: undefined,
      updated: created(widget({ color: "red" })),
      manager: "kubectl-create",
      operation: "Update",
      now: T1,
    });
    // labels is a map (recorded with "."), spec a struct
    expect(managed(o)).toEqual([
      {
        manager: "kubectl-create",
        operation: "Update",
        apiVersion: "example.com/v1",
        time: T1,
        fieldsType: "FieldsV1",
        fieldsV1: { "f:metadata": { "f:labels": { ".": {}, "f:app": {} } }, "f:spec": { "f:color": {} } },
      },
    ]);
  });

  it("a no-op write changes nothing", () => {
    const o = recordUpdate({
      old: undefined,
      updated: created(widget({ color: "red" })),
      manager: "a",
      operation: "Update",
      now: T1,
    });
    const again = recordUpdate({ old: o, updated: { ...o }, manager: "b", operation: "Update", now: T2 });
    expect(managed(again)).toEqual(managed(o));
  });

  it("status writes record the subresource; removed fields leave every manager", () => {
    const o = recordUpdate({
      old: undefined,
      updated: created(widget({ color: "red", size: 1 })),
      manager: "a",
      operation: "Update",
      now: T1,
    });
    const s = recordUpdate({
      old: o,
      updated: { ...o, status: { phase: "Ready" } },
      manager: "ctl",
      operation: "Update",
      subresource: "status",
      now: T2,
    });
    expect(managed(s).find((m) => m["manager"] === "ctl")).toMatchObject({
      subresource: "status",
      fieldsV1: { "f:status": { "f:phase": {} } },
    });
    const r = recordUpdate({
      old: s,
      updated: { ...s, spec: { color: "red" } },
      manager: "b",
      operation: "Update",
      now: T3,
    });
    expect(managed(r).find((m) => m["manager"] === "a")?.["fieldsV1"]).toEqual({
      "f:metadata": { "f:labels": { ".": {}, "f:app": {} } },
      "f:spec": { "f:color": {} },
    });
    expect(managed(r).some((m) => m["manager"] === "b")).toBe(false);
  });

  it("honours client-written managedFields and the [{}] reset", () => {
    const o = recordUpdate({
      old: undefined,
      updated: created(widget({ color: "red" })),
      manager: "a",
      operation: "Update",
      now: T1,
    });
    const given = [
      {
        manager: "kubectl",
        operation: "Apply",
        apiVersion: "example.com/v1",
        time: T1,
        fieldsType: "FieldsV1",
        fieldsV1: { "f:spec": { "f:color": {} } },
      },
    ];
    const migrated = recordUpdate({
      old: o,
      updated: { ...o, metadata: { ...meta(o), managedFields: given } },
      manager: "kubectl",
      operation: "Update",
      now: T2,
    });
    expect(managed(migrated)).toEqual(given);
    const reset = recordUpdate({
      old: o,
      updated: { ...o, metadata: { ...meta(o), managedFields: [{}] } },
      manager: "x",
      operation: "Update",
      now: T2,
    });
    expect(meta(reset)["managedFields"]).toBeUndefined();
    const kept = recordUpdate({
      old: o,
      updated: { ...o, metadata: { ...meta(o), managedFields: [] } },
      manager: "x",
      operation: "Update",
      now: T2,
    });
    expect(managed(kept)).toEqual(managed(o));
  });
});
