import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { conditionReasons } from "./conditions.ts";

// The loops take a kind's reasons as strings; this keeps every reason the operator can write in the closed set
// that the docs, the troubleshooting table and the Argo CD health checks are built from.

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
    .map((e) => path.join(e.parentPath, e.name));
}

describe("condition reasons", () => {
  it("every reason written in src/operator and src/resources is documented in conditionReasons", () => {
    const root = path.resolve(import.meta.dirname, "..");
    const used = new Set<string>();
    const patterns = [/new (?:ReconcileError|TerminalError|WaitingError)\(\s*"(\w+)"/g, /\breason: "(\w+)"/g];
    for (const file of [...sources(path.join(root, "operator")), ...sources(path.join(root, "resources"))]) {
      const text = readFileSync(file, "utf8");
      for (const re of patterns) for (const m of text.matchAll(re)) used.add(m[1]!);
    }
    expect(used.size).toBeGreaterThan(15);
    expect([...used].filter((r) => !(r in conditionReasons))).toEqual([]);
  });
});
