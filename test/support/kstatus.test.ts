// The helper against upstream's own cases for custom resources (cli-utils status_compute_test.go
// TestCRDGenericStatus) and the rules of generic.go it implements, so a test that trusts it trusts kstatus.
import { describe, expect, it } from "vitest";
import { kstatusOf } from "./kstatus.ts";

const meta = (generation = 1, extra: Record<string, unknown> = {}) => ({
  name: "test",
  namespace: "qual",
  generation,
  ...extra,
});
const cond = (type: string, status: string, reason = "R", message = "") => ({ type, status, reason, message });

describe("kstatusOf (sigs.k8s.io/cli-utils pkg/kstatus/status, re-implemented)", () => {
  it("TestCRDGenericStatus: crdNoStatus, crdReady, crdNotReady, crdNoCondition, crdMismatchStatusGeneration", () => {
    expect(kstatusOf({ metadata: meta() }).status).toBe("Current");
    expect(
      kstatusOf({ metadata: meta(), status: { conditions: [cond("Ready", "True", "AllOk", "All looks ok")] } }).status,
    ).toBe("Current");
    expect(
      kstatusOf({
        metadata: meta(),
        status: { observedGeneration: 1, conditions: [cond("Ready", "False", "NotReadyYet")] },
      }),
    ).toMatchObject({ status: "InProgress", reason: "NotReadyYet" });
    expect(kstatusOf({ metadata: meta(), status: { conditions: [cond("SomeCondition", "False")] } }).status).toBe(
      "Current",
    );
    expect(kstatusOf({ metadata: meta(2), status: { observedGeneration: 1 } })).toMatchObject({
      status: "InProgress",
      reason: "LatestGenerationNotObserved",
    });
  });

  it("generic.go: deletion first, then generation, then the first abnormal-true condition, then Ready", () => {
    const stalled = cond("Stalled", "True", "InvalidSpec", "fix it");
    expect(
      kstatusOf({ metadata: meta(1, { deletionTimestamp: "2026-01-01T00:00:00Z" }), status: { conditions: [stalled] } })
        .status,
    ).toBe("Terminating");
    expect(kstatusOf({ metadata: meta(2), status: { observedGeneration: 1, conditions: [stalled] } }).status).toBe(
      "InProgress",
    );
    expect(
      kstatusOf({ metadata: meta(), status: { observedGeneration: 1, conditions: [cond("Ready", "True"), stalled] } }),
    ).toEqual({ status: "Failed", message: "fix it", reason: "InvalidSpec" });
    expect(
      kstatusOf({
        metadata: meta(),
        status: { conditions: [cond("Ready", "True"), cond("Reconciling", "True", "Provisioning")] },
      }).status,
    ).toBe("InProgress");
    // Both abnormal-true: list order decides, as upstream's single loop does.
    expect(kstatusOf({ metadata: meta(), status: { conditions: [cond("Reconciling", "True"), stalled] } }).status).toBe(
      "InProgress",
    );
    expect(kstatusOf({ metadata: meta(), status: { conditions: [stalled, cond("Reconciling", "True")] } }).status).toBe(
      "Failed",
    );
    // False abnormal-true conditions say nothing; Ready Unknown is InProgress.
    expect(
      kstatusOf({
        metadata: meta(),
        status: { conditions: [cond("Reconciling", "False"), cond("Stalled", "False"), cond("Ready", "True")] },
      }).status,
    ).toBe("Current");
    expect(kstatusOf({ metadata: meta(), status: { conditions: [cond("Ready", "Unknown")] } }).status).toBe(
      "InProgress",
    );
    // No observedGeneration: the generation check is skipped.
    expect(kstatusOf({ metadata: meta(7), status: { conditions: [cond("Ready", "True")] } }).status).toBe("Current");
  });
});
