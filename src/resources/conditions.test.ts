import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loopReasons } from "../operator/conditions.ts";
import { sharedReasons } from "./conditions.ts";
import { conditionReasons, kindModules } from "./index.ts";

// The loops take a kind's reasons as strings; this keeps every reason the operator can write declared where it is
// written (the docs, the troubleshooting table and the Argo CD health checks are built from the declarations): the
// loops write only theirs, the kit and the remote model the shared ones too, and a kind's folder its own besides.

const root = path.resolve(import.meta.dirname, "..");
const patterns = [
  /new (?:ReconcileError|TerminalError|WaitingError)\(\s*"(\w+)"/g,
  /\breason: "(\w+)"/g,
  /readyCondition\(\w+, (?:[^"]*\? )?"(\w+)"/g,
  /readyCondition\(\w+, [^"]*\? "\w+" : "(\w+)"/g,
];

function written(dir: string, { recursive }: { recursive: boolean }): Set<string> {
  const used = new Set<string>();
  for (const e of readdirSync(dir, { withFileTypes: true, recursive })) {
    if (!e.isFile() || !e.name.endsWith(".ts") || e.name.endsWith(".test.ts")) continue;
    const text = readFileSync(path.join(e.parentPath, e.name), "utf8");
    for (const re of patterns) for (const m of text.matchAll(re)) used.add(m[1]!);
  }
  return used;
}

const undeclared = (used: Set<string>, ...declared: object[]) => [...used].filter((r) => !declared.some((d) => r in d));

/** Each kind's folder, found by the module its index.ts exports. */
async function kindFolders(): Promise<Map<(typeof kindModules)[number], string>> {
  const folders = new Map<(typeof kindModules)[number], string>();
  for (const e of readdirSync(path.join(root, "resources"), { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    const index = path.join(e.parentPath, e.name, "index.ts");
    const exports = (await import(index).catch(() => ({}))) as Record<string, unknown>;
    for (const value of Object.values(exports)) {
      const module = kindModules.find((k) => k === value);
      if (module) folders.set(module, path.join(e.parentPath, e.name));
    }
  }
  return folders;
}

describe("condition reasons", () => {
  it("the loops write only the loops' reasons", () => {
    const used = written(path.join(root, "operator"), { recursive: true });
    expect(used.size).toBeGreaterThan(10);
    expect(undeclared(used, loopReasons)).toEqual([]);
  });

  it("the kit, the remote model and the registry's files write the loops' and the shared ones", () => {
    const used = new Set([
      ...written(path.join(root, "resources"), { recursive: false }),
      ...written(path.join(root, "resources", "kit"), { recursive: true }),
      ...written(path.join(root, "resources", "remote"), { recursive: true }),
    ]);
    expect(undeclared(used, loopReasons, sharedReasons)).toEqual([]);
  });

  it("a kind's folder writes the loops', the shared ones and its own, and each of its own", async () => {
    const folders = await kindFolders();
    expect(folders.size).toBe(kindModules.length);
    for (const [module, folder] of folders) {
      const used = written(folder, { recursive: true });
      const kind = module.definition.kind;
      expect({ kind, undeclared: undeclared(used, loopReasons, sharedReasons, module.reasons) }).toEqual({
        kind,
        undeclared: [],
      });
      expect({ kind, unused: Object.keys(module.reasons).filter((r) => !used.has(r)) }).toEqual({ kind, unused: [] });
    }
  });

  it("a reason is declared once: a kind that declares a shared or another kind's reason is refused", () => {
    expect(conditionReasons().length).toBe(
      Object.keys(loopReasons).length +
        Object.keys(sharedReasons).length +
        kindModules.reduce((n, k) => n + Object.keys(k.reasons).length, 0),
    );
    const twice = { ...kindModules[0]!, reasons: { RemoteFailure: sharedReasons.RemoteFailure } };
    expect(() => conditionReasons([...kindModules, twice])).toThrow(
      `condition reason RemoteFailure is declared by shared and ${kindModules[0]!.definition.kind}`,
    );
  });
});
