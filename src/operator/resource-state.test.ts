import { describe, expect, it } from "vitest";
import type { KubeObject } from "../kube/types.ts";
import { summarizeResources } from "./resource-state.ts";

const now = Date.parse("2026-01-01T12:00:00Z");
const obj = (name: string, status: Record<string, unknown> | undefined, created = "2026-01-01T11:00:00Z"): KubeObject =>
  ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: "a", creationTimestamp: created },
    ...(status ? { status } : {}),
  }) as KubeObject;
const cond = (type: string, status: string, reason: string, at = "2026-01-01T11:30:00Z") => ({
  type,
  status,
  reason,
  message: "",
  lastTransitionTime: at,
});

describe("summarizeResources", () => {
  it("counts resources by condition, with Ready Unknown for the ones not reconciled yet", () => {
    const s = summarizeResources(
      "Database",
      [
        obj("ok", { conditions: [cond("Ready", "True", "Available"), cond("Synced", "True", "ReconcileSuccess")] }),
        obj("ok2", { conditions: [cond("Ready", "True", "Available")] }),
        obj("bad", {
          conditions: [
            cond("Ready", "False", "InvalidSpec"),
            cond("Synced", "False", "InvalidSpec"),
            cond("Stalled", "True", "InvalidSpec"),
          ],
        }),
        obj("new", undefined),
      ],
      now,
    );
    expect(
      s.conditions.sort((a, b) => `${a.type}${a.status}${a.reason}`.localeCompare(`${b.type}${b.status}${b.reason}`)),
    ).toEqual([
      { type: "Ready", status: "False", reason: "InvalidSpec", count: 1 },
      { type: "Ready", status: "True", reason: "Available", count: 2 },
      { type: "Ready", status: "Unknown", reason: "", count: 1 },
      { type: "Stalled", status: "True", reason: "InvalidSpec", count: 1 },
      { type: "Synced", status: "False", reason: "InvalidSpec", count: 1 },
      { type: "Synced", status: "True", reason: "ReconcileSuccess", count: 1 },
    ]);
  });

  it("measures the longest wait for Ready from the transition, or from creation when Ready was never set", () => {
    expect(
      summarizeResources(
        "Database",
        [obj("bad", { conditions: [cond("Ready", "False", "Creating", "2026-01-01T11:50:00Z")] })],
        now,
      ).longestNotReadySeconds,
    ).toBe(600);
    expect(
      summarizeResources("Database", [obj("new", undefined, "2026-01-01T11:00:00Z")], now).longestNotReadySeconds,
    ).toBe(3600);
    expect(
      summarizeResources(
        "Database",
        [obj("ok", { conditions: [cond("Ready", "True", "Available", "2026-01-01T00:00:00Z")] })],
        now,
      ).longestNotReadySeconds,
    ).toBe(0);
  });

  it("counts overdue rotations and retiring connections past their revokeAt", () => {
    const s = summarizeResources(
      "Database",
      [
        obj("late", { rotation: { nextRotationTime: "2026-01-01T11:00:00Z" } }),
        obj("fine", {
          rotation: {
            nextRotationTime: "2026-01-02T00:00:00Z",
            retiring: { id: "c1", name: "x", revokeAt: "2026-01-01T12:05:00Z" },
          },
        }),
        obj("lapsed", { rotation: { retiring: { id: "c2", name: "y", revokeAt: "2026-01-01T11:59:00Z" } } }),
      ],
      now,
    );
    expect({ overdue: s.rotationOverdue, pastRevoke: s.retiringPastRevoke }).toEqual({ overdue: 1, pastRevoke: 1 });
  });

  it("keeps labels bounded: an odd reason or condition type from a hand-edited status is not a new series", () => {
    const s = summarizeResources(
      "Database",
      [obj("odd", { conditions: [cond("Ready", "False", "db-1234 is gone"), cond("Custom", "True", "X")] })],
      now,
    );
    expect(s.conditions).toEqual([{ type: "Ready", status: "False", reason: "Other", count: 1 }]);
  });
});
