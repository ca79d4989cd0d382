// The docs name only what exists: files and the headings links point at, npm scripts, flags, condition reasons and
// functions; and every Markdown file a code comment cites is in this repository.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  brokenCitations,
  brokenFlags,
  brokenFunctions,
  brokenPaths,
  brokenReasons,
  brokenScripts,
  docFiles,
  unfollowableCitations,
} from "./doc-references.ts";

// Pages other work adds (the guide's index links them already): allowed while absent, checked once they land.
const pending = new Set<string>([]);

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

describe("what the docs name exists", () => {
  const docs = docFiles();

  it("checks the README, BENCHMARKS.md, docs/ and the folders' READMEs", () => {
    for (const doc of ["README.md", "BENCHMARKS.md", "docs/README.md", "src/operator/README.md", "test/e2e/README.md"])
      expect(docs).toContain(doc);
  });
  it("the pending pages are still absent (a page that landed leaves the list, so its links are checked)", () => {
    expect([...pending].filter((p) => existsSync(join(repoRoot, p)))).toEqual([]);
  });
  it("files, directories and linked headings", () => {
    expect(docs.flatMap((d) => brokenPaths(d, pending))).toEqual([]);
  });
  it("npm scripts", () => {
    expect(docs.flatMap((d) => brokenScripts(d))).toEqual([]);
  });
  it("command-line flags", () => {
    expect(docs.flatMap((d) => brokenFlags(d))).toEqual([]);
  });
  it("condition reasons", () => {
    expect(docs.flatMap((d) => brokenReasons(d))).toEqual([]);
  });
  it("functions", () => {
    expect(docs.flatMap((d) => brokenFunctions(d))).toEqual([]);
  });
  it("no comment or page cites an issue number or the old CONTRACT sections", () => {
    expect(unfollowableCitations()).toEqual([]);
  });
  it("Markdown files and headings cited in code comments", () => {
    expect(brokenCitations()).toEqual([]);
  });
});

describe("the checks catch what drifted", () => {
  // A page written against an older tree: each line names something that does not exist (any more).
  const stale = [
    "The loop is in `src/operator/RECONCILE.md`; see [the design](design.md#why-creation-cannot-duplicate).",
    "Run `npm run docs:check`, then `mds operator --poll-medium 5s`.",
    "It waits with reason `ProjectMissing`.",
    "`reconcileManagedObject(deps, kind, key)` walks the steps.",
  ].join("\n");
  const doc = "docs/stale.md";

  it("names each stale path, heading, script, flag, reason and function", () => {
    expect([
      ...brokenPaths(doc, new Set(), stale),
      ...brokenScripts(doc, stale),
      ...brokenFlags(doc, stale),
      ...brokenReasons(doc, stale),
      ...brokenFunctions(doc, stale),
    ]).toEqual([
      "docs/stale.md: link design.md#why-creation-cannot-duplicate (no heading)",
      "docs/stale.md: path src/operator/RECONCILE.md",
      "docs/stale.md: npm script docs:check",
      "docs/stale.md: flag --poll-medium",
      "docs/stale.md: reason ProjectMissing",
      "docs/stale.md: function reconcileManagedObject(deps, kind, key)",
    ]);
  });

  it("passes the same page written against today's tree", () => {
    const today = [
      "The loop is in `src/operator/managed-reconciler.ts`; see [the design](design.md#creating-without-duplicates).",
      "Run `npm run docs:reference`, then `mds operator --poll-fast 1s`.",
      "It waits with reason `ProjectNotReady`.",
      "`createOperator(options)` starts the loops.",
    ].join("\n");
    expect([
      ...brokenPaths(doc, new Set(), today),
      ...brokenScripts(doc, today),
      ...brokenFlags(doc, today),
      ...brokenReasons(doc, today),
      ...brokenFunctions(doc, today),
    ]).toEqual([]);
  });
});
