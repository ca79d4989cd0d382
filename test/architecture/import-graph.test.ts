// No circles in the import graphs of the product (src/) and of devkube (packages/devkube/src/). A circle means neither side can be read, changed or tested without the
// other; cutting it is the point where a folder gets a real interface. Two levels are checked:
// - files: no file reaches itself through its imports (inside a folder or across folders);
// - folders: no folder (a directory with everything below it) reaches itself through its siblings, at every
//   level: src/operator ↔ src/resources, or src/resources/database ↔ src/resources/project. A parent's own files may
//   import its subfolders (a registry) and be imported by them (shared helpers): the file check covers that case.
// Every import counts: type-only imports, `export … from`, dynamic import() and `import("…")` types alike, because a
// type import ties the two files together for a reader as much as a value import does.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const repoRoot = path.resolve(import.meta.dirname, "../..");
const roots = ["src", "packages/devkube/src"];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [full] : [];
  });
}

/** root-relative file → the files under root it imports (relative specifiers only: packages are outside the graph). */
export function importGraph(root: string): Map<string, string[]> {
  const files = sourceFiles(root);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((s) => s.startsWith("."))
      .map((s) => path.resolve(path.dirname(file), s))
      .filter((t) => known.has(t));
    graph.set(path.relative(root, file), [...new Set(targets.map((t) => path.relative(root, t)))].sort());
  }
  return graph;
}

/** Tarjan's strongly connected components with more than one node (or a node importing itself). */
export function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found.sort((a, b) => (a[0] ?? "").localeCompare(b[0] ?? ""));
}

/** One path around a circle, for the message: a → b → … → a (the shortest back to its first node). */
export function describeCircle(graph: Map<string, string[]>, component: string[]): string {
  const inside = new Set(component);
  const start = component[0] ?? "";
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const route = [v];
        while (route[0] !== start) route.unshift(previous.get(route[0]!)!);
        return [...route, start].join(" → ");
      }
      if (!previous.has(w)) {
        previous.set(w, v);
        queue.push(w);
      }
    }
  }
  return component.join(", ");
}

/** The folder graph at every level: for each folder, its subfolders (each with everything below it) as nodes. */
export function siblingFolderGraphs(files: Map<string, string[]>): Map<string, Map<string, string[]>> {
  const graphs = new Map<string, Map<string, string[]>>();
  const childOf = (parent: string, file: string): string | undefined => {
    const rest = parent === "" ? file : file.startsWith(parent + "/") ? file.slice(parent.length + 1) : undefined;
    const parts = rest?.split("/") ?? [];
    return parts.length > 1 ? path.posix.join(parent, parts[0]!) : undefined;
  };
  const folders = new Set([""]);
  for (const file of files.keys())
    for (let d = path.posix.dirname(file); d !== "."; d = path.posix.dirname(d)) folders.add(d);
  for (const parent of folders) {
    const graph = new Map<string, Set<string>>();
    for (const [file, targets] of files) {
      const from = childOf(parent, file);
      if (from === undefined) continue;
      if (!graph.has(from)) graph.set(from, new Set());
      for (const target of targets) {
        const to = childOf(parent, target);
        if (to !== undefined && to !== from) graph.get(from)!.add(to);
      }
    }
    if (graph.size > 1) graphs.set(parent, new Map([...graph].map(([k, v]) => [k, [...v].sort()])));
  }
  return graphs;
}

describe("the import graph", () => {
  it("reads every kind of import: type-only, export-from, dynamic and import() types", () => {
    const source = `import type { A } from "./a.ts";
export { B } from "./b.ts";
export type { C } from "./c.ts";
const d = await import("./d.ts");
type E = import("./e.ts").E;`;
    const specifiers = ts.preProcessFile(source, true, true).importedFiles.map((i) => i.fileName);
    expect(specifiers.sort()).toEqual(["./a.ts", "./b.ts", "./c.ts", "./d.ts", "./e.ts"]);
  });

  for (const root of roots) {
    describe(root, () => {
      const files = importGraph(path.join(repoRoot, root));

      it("has no circle between files", () => {
        expect(files.size).toBeGreaterThan(30);
        expect(circles(files).map((c) => describeCircle(files, c))).toEqual([]);
      });

      it("has no circle between folders, at any level", () => {
        const found: string[] = [];
        for (const [parent, graph] of siblingFolderGraphs(files)) {
          for (const c of circles(graph))
            found.push(`in ${path.posix.join(root, parent)}: ${describeCircle(graph, c)}`);
        }
        expect(found).toEqual([]);
      });
    });
  }
});
