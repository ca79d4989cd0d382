import { readFile } from "node:fs/promises";
import { crashPoints } from "../../../src/resources/index.ts";

// The operator's named crash points, as the chaos harness uses them. MDS_CRASH_POINT=<name>[:<count>][,...] (test
// only) makes the operator SIGKILL itself the count-th time it reaches one of the named points; it says which in its
// log first, so a harness that armed several can tell which one was hit.

export type ChaosStep = "create" | "update" | "secret" | "rotate" | "restore" | "backup" | "branch" | "delete";

/** The lifecycle step that passes each point, by its suffix (restore and backup points belong to their kinds only). */
export function stepOf(point: string): ChaosStep {
  if (point.startsWith("restore:")) return "restore";
  if (point.startsWith("backup:")) return "backup";
  // Passed only by a Database with spec.branch, which the chaos lifecycle does not make (test/e2e/branches.test.ts).
  if (point.endsWith(":after-branch-create")) return "branch";
  if (/:after-(create|secret)$/.test(point)) return "create";
  if (/:after-update$/.test(point)) return "update";
  if (/:(after-recover|before-revoke)$/.test(point)) return "secret";
  if (/:(after-rotate-mint|after-rotate-secret|after-rotate-restart|before-retire)$/.test(point)) return "rotate";
  if (/:(after-delete|before-finalizer-drop)$/.test(point)) return "delete";
  throw new Error(`crash point ${point} belongs to no chaos step: add it to stepOf`);
}

/** Crash points that the step passes. */
export function crashPointsForStep(step: ChaosStep, all: readonly string[] = crashPoints()): string[] {
  return all.filter((name) => stepOf(name) === step);
}

/**
 * Drops points that an earlier armed point of the same step would make unreachable: after a crash at
 * `<kind>:after-create` the restarted operator adopts the remote object and rebuilds its Secret through the recovery
 * path, which never passes `<kind>:after-secret`. Of each such pair one is kept, chosen by `random`.
 */
export function reachableTogether(points: readonly string[], random: () => number): string[] {
  const dropped = new Set<string>();
  for (const point of points) {
    const m = /^(.+):after-create$/.exec(point);
    const shadowed = m === null ? undefined : `${m[1]}:after-secret`;
    if (shadowed !== undefined && points.includes(shadowed)) dropped.add(random() < 0.5 ? point : shadowed);
  }
  return points.filter((p) => !dropped.has(p));
}

/** The value of MDS_CRASH_POINT that arms every point in `points` (each at its first arrival). */
export function armValue(points: readonly string[], count = 1): string {
  return points.map((p) => `${p}:${count}`).join(",");
}

/** The crash point an operator process said it was killed at (its log's last such line), if any. */
export async function reachedCrashPoint(logFile: string): Promise<string | undefined> {
  const text = await readFile(logFile, "utf8").catch(() => "");
  const matches = [...text.matchAll(/^mds operator: crash point (\S+) reached/gm)];
  return matches.at(-1)?.[1];
}
