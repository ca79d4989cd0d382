// Rules the docs state about the code hold, and counts the docs give are the code's: the kinds the operator watches
// (from the registry), the crash points (from the kinds' controllers), and the files that still read another kind
// through a string and a cast (named in src/resources/README.md so that the list shrinks, never grows unnoticed).
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { crashPoints, kindModules } from "../../src/resources/index.ts";
import { docFiles, repoRoot } from "./doc-references.ts";

const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");
const kinds = kindModules.map((k) => k.definition.kind);

/** Prose sentences of a Markdown text, without fenced blocks (a drawing is not a claim); tables are skipped by the caller. */
function sentencesOf(text: string): string[] {
  const prose = text.replace(/^```[\s\S]*?^```/gm, "");
  return prose.replace(/\n/g, " ").split(/(?<=\.)\s+/);
}

/** A sentence saying what the operator watches or what you apply, naming three kinds or more, names every kind. */
export function partialKindSentences(doc: string, text: string): string[] {
  const broken: string[] = [];
  for (const sentence of sentencesOf(text)) {
    if (sentence.includes("|") || !/\b(watch(es)?|you apply)\b/i.test(sentence)) continue;
    const named = kinds.filter((k) => new RegExp(`(?<![\\w-])${k}(?![\\w-])`).test(sentence));
    if (named.length >= 3 && named.length < kinds.length)
      broken.push(`${doc}: "${sentence.slice(0, 100)}…" misses ${kinds.filter((k) => !named.includes(k)).join(", ")}`);
  }
  return broken;
}

/** "all N points", "N named points", "N crash points": N is the number of crash points the code has. */
export function wrongCrashPointCounts(doc: string, text: string, count: number): string[] {
  const broken: string[] = [];
  for (const m of text.matchAll(/\b(?:all (\d+) (?:named |crash )?points|(\d+) (?:named|crash) points)\b/g)) {
    const n = Number(m[1] ?? m[2]);
    if (n !== count) broken.push(`${doc}: "${m[0]}" but the code has ${count}`);
  }
  return broken;
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(join(repoRoot, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
    .map((f) => join(dir, f));
}

describe("counts and rules the docs state", () => {
  // Dated benchmark records say what was true at their commit.
  const docs = docFiles()
    .filter((d) => !d.startsWith("bench/history/"))
    .map((d) => ({ doc: d, text: read(d) }));

  it("every sentence listing the kinds the operator watches, or you apply, lists them all", () => {
    expect(docs.flatMap(({ doc, text }) => partialKindSentences(doc, text))).toEqual([]);
  });

  it("every count of the crash points is the code's", () => {
    const count = crashPoints().length;
    expect(count).toBeGreaterThan(30);
    expect(docs.flatMap(({ doc, text }) => wrongCrashPointCounts(doc, text, count))).toEqual([]);
  });

  it("src/resources/README.md names exactly the files that read another kind through a string and a cast", () => {
    const breaking = sourcesUnder("src/resources")
      .filter((f) => /cache\("[A-Z]|\["(?:spec|status)"\][^;]* as \{/.test(read(f)))
      .map((f) => relative("src/resources", f))
      .sort();
    const readme = read("src/resources/README.md");
    const paragraph = readme.slice(readme.indexOf("Older code still reads"), readme.indexOf("A new remote call"));
    const named = [...paragraph.matchAll(/`([\w/-]+\.ts)`/g)].map((m) => m[1]).sort();
    expect(named).toEqual(breaking);
  });

  it("the checks find what they look for (planted)", () => {
    expect(partialKindSentences("planted.md", "The operator watches Project, Database and Connection.")).toHaveLength(1);
    expect(partialKindSentences("planted.md", "```\nwatches Project, Database, Connection\n```\n")).toEqual([]);
    expect(wrongCrashPointCounts("planted.md", "all 30 points hit; 15 named points", 33)).toEqual([
      'planted.md: "all 30 points" but the code has 33',
      'planted.md: "15 named points" but the code has 33',
    ]);
  });
});
