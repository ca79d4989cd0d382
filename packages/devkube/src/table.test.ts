import { describe, expect, it } from "vitest";
import { evaluateJsonPath } from "./jsonpath.ts";
import { humanDuration } from "./table.ts";

describe("humanDuration (apimachinery wording)", () => {
  it.each([
    [5, "5s"],
    [119, "119s"],
    [182, "3m2s"],
    [600, "10m"],
    [45 * 60, "45m"],
    [4 * 3600 + 5 * 60, "4h5m"],
    [30 * 3600, "30h"],
    [3 * 86400 + 5 * 3600, "3d5h"],
    [10 * 86400, "10d"],
    [-0.5, "0s"],
    [-5, "<invalid>"],
  ])("%ss → %s", (s, want) => {
    expect(humanDuration(s * 1000)).toBe(want);
  });
});

describe("printer-column JSONPath", () => {
  const o = {
    spec: { size: 3, "a.b": 1 },
    status: {
      conditions: [
        { type: "Synced", status: "False" },
        { type: "Ready", status: "True" },
      ],
    },
    items: [1, 2, 3],
  };
  it.each([
    [".spec.size", [3]],
    ['.status.conditions[?(@.type=="Ready")].status', ["True"]],
    [".status.conditions[*].type", ["Synced", "Ready"]],
    [".items[-1]", [3]],
    [".items[0:2]", [1, 2]],
    ["{.spec.size}", [3]],
    [".spec['a.b']", [1]],
    [".spec.missing", []],
  ])("%s", (expr, want) => {
    expect(evaluateJsonPath(expr, o)).toEqual(want);
  });
});
