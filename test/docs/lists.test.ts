// Lists in the documentation agree with what they list: the CRDs (crds/), the kinds, the install's overlays and
// components (deploy/), the metrics (the generated table of docs/metrics.md) and what devkube serves (asked of a
// running devkube). A list that names some of a set where it means all of it is what goes stale when the set grows;
// each check returns the broken lines as `<doc>:<line>: <what>`.
import { readFileSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import { runKubectl } from "../support/kubectl.ts";
import { docFiles, repoRoot } from "./doc-references.ts";

const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");
// The chart's README besides the docs doc-references checks.
const docs = [...docFiles(), "charts/mds/README.md"];

interface Crd {
  kind: string;
  metadata: { name: string };
  spec: { names: { kind: string } };
}
const crds = readdirSync(join(repoRoot, "crds"))
  .filter((f) => f.endsWith(".yaml"))
  .flatMap((f) => parseAllDocuments(read(join("crds", f))).map((d) => d.toJS() as Crd))
  .filter((d) => d.kind === "CustomResourceDefinition");
const crdNames = crds.map((c) => c.metadata.name).sort();
const kinds = crds.map((c) => c.spec.names.kind).sort();
const numberWords: Record<string, number> = { two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10 };

/** A doc's lines, a shell line continued with `\` joined to the next, with their line numbers. */
function linesOf(content: string): { n: number; text: string }[] {
  const out: { n: number; text: string }[] = [];
  let pending: { n: number; text: string } | undefined;
  content
    .split("\n")
    .forEach((line, i) => {
      const current: { n: number; text: string } = pending === undefined ? { n: i + 1, text: line } : { n: pending.n, text: `${pending.text} ${line}` };
      if (line.endsWith("\\")) pending = { n: current.n, text: current.text.slice(0, -1) };
      else {
        pending = undefined;
        out.push(current);
      }
    });
  return out;
}

/** A line naming two or more mds CRDs names them all (a verify step, a table of what is installed, a transcript). */
function partialCrdLists(doc: string, content = read(doc)): string[] {
  const broken: string[] = [];
  for (const { n, text } of linesOf(content)) {
    const named = new Set(crdNames.filter((name) => new RegExp(`(^|[^a-z.])${name.replace(/\./g, "\\.")}\\b`).test(text)));
    if (named.size >= 2 && named.size < crdNames.length)
      broken.push(`${doc}:${n}: names ${named.size} of the ${crdNames.length} CRDs (missing ${crdNames.filter((c) => !named.has(c)).join(", ")})`);
  }
  return broken;
}

/** "N kinds" and "the N CRDs" count them all (not "these two kinds"); a list in parentheses right after "N kinds" names every kind. */
function wrongKindCounts(doc: string, content = read(doc)): string[] {
  const broken: string[] = [];
  for (const { n, text } of linesOf(content)) {
    // "these two kinds", "those two kinds": a subset named just before, not a count of all.
    for (const m of text.matchAll(/(?<!\b(?:these|those) )\b(two|three|four|five|six|seven|eight|nine|ten|\d+) (mds )?(kinds|CRDs)\b(\s*\(([^)]*)\))?/gi)) {
      const count = numberWords[m[1]!.toLowerCase()] ?? Number(m[1]);
      if (count !== kinds.length) broken.push(`${doc}:${n}: "${m[0]}" but there are ${kinds.length}`);
      const list = m[5];
      if (list !== undefined) {
        const listed = kinds.filter((k) => new RegExp(`\\b${k}\\b`).test(list));
        if (listed.length !== kinds.length) broken.push(`${doc}:${n}: "${m[0]}" lists ${listed.length} kinds`);
      }
    }
  }
  return broken;
}

/** Every overlay and component of deploy/ is named in deploy/README.md. */
function unlistedDeployParts(): string[] {
  const readme = read("deploy/README.md");
  return ["overlays", "components"].flatMap((dir) =>
    readdirSync(join(repoRoot, "deploy", dir))
      .filter((name) => !readme.includes(`${dir}/${name}`))
      .map((name) => `deploy/README.md: deploy/${dir}/${name} not described`),
  );
}

/** Every mds metric a doc names in backticks is in the generated table (a `*` ends a family prefix). */
function unknownMetrics(doc: string, metrics: string[], content = read(doc)): string[] {
  const broken: string[] = [];
  for (const { n, text } of linesOf(content)) {
    for (const m of text.matchAll(/`(mds_(?:operator|client|database|build)_[a-z_]*\*?)`/g)) {
      const name = m[1]!;
      const known = name.endsWith("*") ? metrics.some((x) => x.startsWith(name.slice(0, -1))) : metrics.includes(name);
      if (!known) broken.push(`${doc}:${n}: metric ${name} is not served`);
    }
  }
  return broken;
}

describe("the lists in the docs", () => {
  it("every line naming mds CRDs names all of them", () => {
    expect(crdNames.length).toBeGreaterThanOrEqual(6);
    expect(docs.flatMap((d) => partialCrdLists(d))).toEqual([]);
  });

  it("every count of the kinds is theirs, and a list after it names them all", () => {
    expect(docs.flatMap((d) => wrongKindCounts(d))).toEqual([]);
  });

  it("deploy/README.md describes every overlay and component", () => {
    expect(unlistedDeployParts()).toEqual([]);
  });

  it("every mds metric named in the docs is in the generated metrics table", () => {
    const table = read("docs/metrics.md").split("<!-- BEGIN generated: metrics table")[1]?.split("<!-- END generated")[0] ?? "";
    const metrics = [...table.matchAll(/^\| `([a-z_:]+)` \|/gm)].map((m) => m[1]!);
    expect(metrics).toContain("mds_build_info");
    expect(docs.flatMap((d) => unknownMetrics(d, metrics))).toEqual([]);
  });

  it("the checks find a stale list (planted)", () => {
    const verify = "kubectl wait --for=condition=Established \\\n  crd/projects.mds.dev crd/databases.mds.dev\n";
    expect(partialCrdLists("planted.md", verify)).toEqual([expect.stringMatching(/^planted\.md:1: names 2 of the \d+ CRDs \(missing .*backupschedules\.mds\.dev/)]);
    expect(wrongKindCounts("planted.md", "It watches four kinds (Project, Database, Connection, DatabaseRestore).")).toEqual([
      `planted.md:1: "four kinds (Project, Database, Connection, DatabaseRestore)" but there are ${kinds.length}`,
      `planted.md:1: "four kinds (Project, Database, Connection, DatabaseRestore)" lists 4 kinds`,
    ]);
    expect(unknownMetrics("planted.md", ["mds_build_info"], "`mds_build_info` and `mds_operator_process_cpu_seconds_total`")).toEqual([
      "planted.md:1: metric mds_operator_process_cpu_seconds_total is not served",
    ]);
  });
});

describe("what the docs say devkube serves", () => {
  let dir: string;
  let devkube: Devkube;
  let served: string[];
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-docs-devkube-"));
    devkube = await startDevkube({ dir });
    const r = await runKubectl(devkube.kubeconfigPath, ["api-resources", "--no-headers", "-o", "wide"]);
    // NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS [CATEGORIES]: the kind is the column after true/false.
    served = r.stdout
      .split("\n")
      .map((line) => /\s(?:true|false)\s+(\w+)\s/.exec(line)?.[1])
      .filter((k): k is string => k !== undefined);
  }, 60_000);
  afterAll(async () => {
    await devkube?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("no doc says devkube does not serve a kind it serves", () => {
    expect(served).toEqual(expect.arrayContaining(["Deployment", "Service", "PodDisruptionBudget", "Pod"]));
    const broken: string[] = [];
    for (const doc of docs) {
      // Sentences, not lines: the claim and its list of kinds often wrap.
      for (const sentence of read(doc).replace(/\n/g, " ").split(/(?<=\.)\s+/)) {
        if (!/devkube/.test(sentence) || !/(does not|doesn't|do not) serve|serves no\b/.test(sentence)) continue;
        const claimed = served.filter((k) => new RegExp(`\\b${k}s?\\b`).test(sentence.split(/(?:does not|doesn't|do not) serve|serves no/)[1] ?? ""));
        if (claimed.length > 0) broken.push(`${doc}: "${sentence.slice(0, 120)}…" names ${claimed.join(", ")}, which devkube serves`);
      }
    }
    expect(broken).toEqual([]);
  });
});
