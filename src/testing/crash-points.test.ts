import { describe, expect, it } from "vitest";
import { crashPointsForStep, crashPointsInSource, discoverCrashPoints } from "./crash-points.ts";
import { repoRoot } from "./chaos-stack.ts";

describe("crash points", () => {
  it("reads names from crashPoint calls, expanding template parts to each kind", () => {
    const source = 'await deps.crashPoint("restore:after-post");\nawait this.deps.crashPoint(`${kind}:after-create`);';
    expect(crashPointsInSource(source).sort()).toEqual(["database:after-create", "databaserestore:after-create", "project:after-create", "restore:after-post"]);
  });

  it("maps names to the steps that can reach them; restore points only to restores", () => {
    const all = ["database:after-create", "database:after-secret", "restore:after-post", "database:after-delete"];
    expect(crashPointsForStep("create", all)).toEqual(["database:after-create", "database:after-secret"]);
    expect(crashPointsForStep("restore", all)).toEqual(["restore:after-post"]);
    expect(crashPointsForStep("delete", all)).toEqual(["database:after-delete"]);
    const more = ["database:after-update", "database:after-recover", "database:before-revoke", "database:before-finalizer-drop"];
    expect(crashPointsForStep("update", more)).toEqual(["database:after-update"]);
    expect(crashPointsForStep("secret", [...all, ...more])).toEqual(["database:after-recover", "database:before-revoke"]);
    expect(crashPointsForStep("create", more)).toEqual([]);
    expect(crashPointsForStep("delete", more)).toEqual(["database:before-finalizer-drop"]);
  });

  it("finds the operator's crash points in this repository", async () => {
    expect((await discoverCrashPoints(repoRoot)).length).toBeGreaterThan(0);
  });
});
