import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { crashPoints } from "../../../src/resources/index.ts";
import { armValue, crashPointsForStep, reachableTogether, reachedCrashPoint, stepOf } from "./crash-points.ts";

describe("crash points", () => {
  it("gives every operator crash point a chaos step", () => {
    const byStep = Object.fromEntries(
      ["create", "update", "secret", "rotate", "restore", "backup", "branch", "delete"].map((s) => [
        s,
        crashPointsForStep(s as never),
      ]),
    );
    expect(Object.values(byStep).flat().sort()).toEqual(crashPoints().sort());
    expect(byStep["update"]).toEqual(["database:after-update"]);
    expect(byStep["restore"]).toEqual(["restore:before-post", "restore:after-post"]);
    expect(byStep["backup"]).toEqual(["backup:before-post", "backup:after-post"]);
    expect(byStep["branch"]).toEqual(["database:after-branch-create"]);
    expect(byStep["rotate"]).toHaveLength(12); // four points for each of the three kinds that publish a Secret
    expect(() => stepOf("database:somewhere-new")).toThrow(/belongs to no chaos step/);
  });

  it("keeps one of after-create and after-secret of a kind: a crash at the first skips the second", () => {
    const create = crashPointsForStep("create");
    expect(reachableTogether(create, () => 0.9)).toEqual([
      "project:after-create",
      "database:after-create",
      "connection:after-create",
    ]);
    expect(reachableTogether(create, () => 0.1)).toEqual([
      "project:after-secret",
      "database:after-secret",
      "connection:after-secret",
    ]);
    expect(reachableTogether(["database:after-update"], () => 0.1)).toEqual(["database:after-update"]);
  });

  it("arms several points in one value and reads back which one killed the process", async () => {
    expect(armValue(["a:x", "b:y"])).toBe("a:x:1,b:y:1");
    const dir = await mkdtemp(path.join(tmpdir(), "mds-crash-points-"));
    try {
      const log = path.join(dir, "operator.log");
      await writeFile(
        log,
        '{"msg":"Operator started"}\nmds operator: crash point database:after-secret reached (1): killing this process\n',
      );
      expect(await reachedCrashPoint(log)).toBe("database:after-secret");
      expect(await reachedCrashPoint(path.join(dir, "missing.log"))).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
