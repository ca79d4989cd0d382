// scripts/unused-exports.ts (run by `npm run lint`) on a small project of its own: what counts as a use, what fails.
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unusedExports } from "../../scripts/unused-exports.ts";

const files: Record<string, string> = {
  "tsconfig.json": JSON.stringify({
    compilerOptions: { module: "nodenext", allowImportingTsExtensions: true, noEmit: true, strict: true },
    include: ["src", "test"],
  }),
  "src/lib/values.ts": `export const imported = 1;
export const onlyUsedHere = 2;
export const viaBarrel = 3;
export const neverUsed = onlyUsedHere;
export type ImportedType = { a: number };
export function viaDynamicImport() {}
`,
  "src/lib/index.ts": `export * from "./values.ts";\nexport { viaDynamicImport as renamed } from "./values.ts";\n`,
  "src/lib/orphan.ts": `export * from "./values.ts";\n`,
  "src/lib/dynamic.ts": `export function loaded() {}\n`,
  "src/main.ts": `import { imported } from "./lib/values.ts";
import type { ImportedType } from "./lib/values.ts";
import { viaBarrel } from "./lib/index.ts";
export const run = async (t: ImportedType) => [imported, viaBarrel, t, (await import("./lib/dynamic.ts")).loaded];
`,
  "test/main.test.ts": `import { run } from "../src/main.ts";\nvoid run;\n`,
};

describe("the unused-export check", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "mds-unused-exports-"));
    for (const [name, text] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(root, name)), { recursive: true });
      await writeFile(path.join(root, name), text);
    }
  });
  afterAll(async () => {
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  });

  // An explicit re-export (`export { x as renamed } from`) is a use of x; the re-export itself is checked in turn.
  it("fails on what no other file imports: a use in its own file, or a barrel nobody reads, does not count", () => {
    const result = unusedExports({ root, checked: ["src/"], entryPoints: [], allowed: [] });
    expect(result).toEqual({
      findings: [
        "src/lib/index.ts:2 renamed",
        "src/lib/orphan.ts:1 * (no file imports this module)",
        "src/lib/values.ts:2 onlyUsedHere",
        "src/lib/values.ts:4 neverUsed",
      ],
      stale: [],
    });
  });

  it("counts type-only imports, barrels (export *), dynamic import() and tests as uses; entry points are exempt", () => {
    const result = unusedExports({ root, checked: ["src/"], entryPoints: ["src/lib/orphan.ts"], allowed: [] });
    const flagged = result.findings.map((f) => f.split(" ")[1]);
    for (const used of ["imported", "ImportedType", "viaBarrel", "loaded", "run", "*"])
      expect(flagged).not.toContain(used);
  });

  it("skips allowed exports and fails on an allowance that no longer matches", () => {
    const allowed = [
      { file: "src/lib/values.ts", export: "neverUsed", why: "test" },
      { file: "src/lib/values.ts", export: "imported", why: "stale: it is imported" },
    ];
    const result = unusedExports({ root, checked: ["src/lib/values.ts"], entryPoints: [], allowed });
    expect(result).toEqual({
      findings: ["src/lib/values.ts:2 onlyUsedHere"],
      stale: ["src/lib/values.ts imported"],
    });
  });
});
