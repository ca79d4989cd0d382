import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

// The service's rooms (README.md, "Code layout: a folder per concern") stack in one order: a room imports only rooms
// below it, and no file imports itself back through others. Type-only imports count: a circle of types is still a
// circle to read.
const serviceDir = import.meta.dirname;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** file → the files of src/service it imports (static, `export … from` and dynamic imports). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(serviceDir)) {
    const specifiers = [...readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)];
    const targets = specifiers
      .map((m) => path.resolve(path.dirname(file), m[1]!))
      .filter((target) => target.startsWith(serviceDir + path.sep));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** One circle of the graph as a path that returns to its start, or undefined. */
function findCircle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): string[] | undefined => {
    if (state.get(node) === "done") return undefined;
    if (state.get(node) === "open") return [...stack.slice(stack.indexOf(node)), node];
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      const circle = visit(next);
      if (circle) return circle;
    }
    stack.pop();
    state.set(node, "done");
    return undefined;
  };
  for (const node of graph.keys()) {
    const circle = visit(node);
    if (circle) return circle;
  }
  return undefined;
}

const roomOf = (file: string): string => path.relative(serviceDir, path.dirname(file)) || ".";

describe("the service's rooms", () => {
  const files = importGraph();

  it("have no import circle between files", () => {
    expect(findCircle(files)?.map((f) => path.relative(serviceDir, f))).toBeUndefined();
  });

  it("have no import circle between folders", () => {
    const rooms = new Map<string, string[]>();
    for (const [file, targets] of files) {
      const from = roomOf(file);
      const to = targets.map(roomOf).filter((room) => room !== from);
      rooms.set(from, [...new Set([...(rooms.get(from) ?? []), ...to])]);
    }
    expect(findCircle(rooms)).toBeUndefined();
  });
});
