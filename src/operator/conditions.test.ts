import { describe, expect, it } from "vitest";
import { setCondition } from "./conditions.ts";

describe("setCondition", () => {
  it("keeps lastTransitionTime while a condition's status does not change", () => {
    const t1 = new Date("2026-01-01T00:00:00Z");
    const t2 = new Date("2026-01-01T01:00:00Z");
    const a = setCondition(undefined, { type: "Ready", status: "False", reason: "Creating", message: "x" }, t1);
    const b = setCondition(a, { type: "Ready", status: "False", reason: "Provisioning", message: "y" }, t2);
    expect(b[0]!.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
    const c = setCondition(b, { type: "Ready", status: "True", reason: "Available", message: "" }, t2);
    expect(c[0]!.lastTransitionTime).toBe("2026-01-01T01:00:00Z");
  });
});
