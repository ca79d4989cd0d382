import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The Secret component's shape (README.md): no import circle among its files, and nothing outside it writes the
// Secret's own records (the restore ledger, the revoke list, the hashes).

const here = dirname(fileURLToPath(import.meta.url));
const src = join(here, "../..");

function productFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return productFiles(path);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** The file without its comments: a comment may name a record, only code can write one. */
function codeOf(file: string): string {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => !/^\s*(\/\/|\/?\*)/.test(line))
    .join("\n");
}

function localImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/from\s+"(\.\/[^"]+)"/g)].map((m) => join(dirname(file), m[1]!));
}

describe("the Secret component", () => {
  it("has no import circle among its files", () => {
    const files = productFiles(here);
    const graph = new Map(files.map((f) => [f, localImports(f)]));
    const circles: string[] = [];
    const visit = (file: string, path: string[]) => {
      if (path.includes(file)) {
        circles.push([...path.slice(path.indexOf(file)), file].map((f) => relative(here, f)).join(" → "));
        return;
      }
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    };
    for (const f of files) visit(f, []);
    expect(circles).toEqual([]);
  });

  it("is the only product code that names the Secret's records", () => {
    const records =
      /annotations\.(restores|revoke|dataHash|credentialsHash)\b|mds\.dev\/(restores|revoke|data-hash|credentials-hash)/;
    const outside = productFiles(src)
      .filter((f) => !f.startsWith(here) && !f.includes(`${join("src", "devkube")}`))
      .filter((f) => records.test(codeOf(f)))
      .map((f) => relative(src, f));
    expect(outside).toEqual([]);
  });
});
