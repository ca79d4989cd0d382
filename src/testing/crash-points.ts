import { readdir, readFile } from "node:fs/promises";
import path from "node:path";

// The operator's named crash points (test-only: MDS_CRASH_POINT=<name>:<count> makes the operator
// SIGKILL itself the count-th time it reaches <name>). The list comes from the operator when it
// exports one (src/operator/crash-points.ts: `crashPoints`), else from its source, so new points are
// picked up without editing the chaos harness.

const kinds = ["project", "database", "databaserestore"];

/** Names found in `crashPoint("...")` calls; `${…}` parts expand to each kind. */
export function crashPointsInSource(source: string): string[] {
  const names = new Set<string>();
  for (const m of source.matchAll(/crashPoint\(\s*(["'`])([^"'`]+)\1/g)) {
    const raw = m[2] ?? "";
    if (raw.includes("${")) {
      for (const kind of kinds) names.add(raw.replace(/\$\{[^}]*\}/g, kind));
    } else {
      names.add(raw);
    }
  }
  return [...names];
}

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sourceFiles(full)));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) out.push(full);
  }
  return out;
}

export async function discoverCrashPoints(repoRoot: string): Promise<string[]> {
  try {
    const specifier = path.join(repoRoot, "src/operator/crash-points.ts");
    const mod = (await import(specifier)) as { crashPoints?: readonly string[] };
    if (Array.isArray(mod.crashPoints) && mod.crashPoints.length > 0) return [...mod.crashPoints];
  } catch {
    // No exported list: read the source.
  }
  const names = new Set<string>();
  for (const dir of ["src/operator", "src/resources"]) {
    for (const file of await sourceFiles(path.join(repoRoot, dir))) {
      for (const n of crashPointsInSource(await readFile(file, "utf8"))) names.add(n);
    }
  }
  return [...names].sort();
}

export type ChaosStep = "create" | "update" | "secret" | "restore" | "delete";

const stepPatterns: Record<ChaosStep, RegExp> = {
  create: /create|adopt|after-secret|publish|annotat|lookup/,
  update: /update|patch|status|drift/,
  secret: /rebuild|mint|revoke|recover|credential/,
  restore: /restore/,
  delete: /delet|finalizer|release|retain/,
};

/** Crash points that the step can reach (by name); restore points only for restores. */
export function crashPointsForStep(step: ChaosStep, all: readonly string[]): string[] {
  return all.filter((name) => stepPatterns[step].test(name) && (step === "restore" || !/restore/.test(name)));
}
