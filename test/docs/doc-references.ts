// What the documentation names must exist: files (and the headings links point at), npm scripts, command-line flags,
// condition reasons and functions. test/docs/doc-references.test.ts runs these checks over every doc; each check
// returns the broken names as `<doc>: <what>` lines.
import { readFileSync, readdirSync } from "node:fs";
import { basename, dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { conditionReasons } from "../../src/resources/index.ts";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const skippedDirs = new Set(["node_modules", ".git", "dist", ".mds", ".tmp", ".image", "coverage"]);

/** Every file of the working tree (relative paths), less dependencies and build or runtime output. */
export function repoFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(repoRoot, dir), { withFileTypes: true })) {
      if (skippedDirs.has(entry.name)) continue;
      const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else out.push(path);
    }
  };
  walk("");
  return out.sort();
}

const files = repoFiles();
const fileSet = new Set(files);
const dirSet = new Set(files.flatMap((f) => f.split("/").slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join("/"))));
const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");

/** The documents checked: the README, BENCHMARKS.md, docs/, every folder's README and Markdown beside the code. */
export function docFiles(): string[] {
  return files.filter(
    (f) =>
      f === "README.md" ||
      f === "BENCHMARKS.md" ||
      /^(docs|bench)\/.*\.md$/.test(f) ||
      /^(src|test|deploy|examples)\/(.*\/)?[^/]+\.md$/.test(f),
  );
}

/** Source text (code, scripts, manifests): where a flag, function or string must appear to exist. */
// (Not test/docs/: its own test plants stale names.)
const sourceText = files
  .filter(
    (f) =>
      /^(src|test|bench|scripts|bin|deploy|packages)\//.test(f) && /\.(ts|js|mjs|sh|yaml|json)$/.test(f) && !f.startsWith("test/docs/"),
  )
  .concat(["package.json", "Dockerfile"].filter((f) => fileSet.has(f)))
  .map(read)
  .join("\n");

/** GitHub's anchors of a Markdown file's headings. */
export function anchorsOf(path: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of read(path).split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!m?.[1]) continue;
    const text = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/[`*_]/g, (c) => (c === "_" ? "_" : ""));
    const base = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** The file a name refers to from `fromDir`: relative to it, else to the root; a bare name may be anywhere. */
export function resolvePath(fromDir: string, name: string): string | undefined {
  const clean = name.replace(/\/$/, "");
  for (const candidate of [normalize(join(fromDir, clean)), normalize(clean)]) {
    const rel = relative(".", candidate);
    if (fileSet.has(rel) || dirSet.has(rel)) return rel;
  }
  if (!clean.includes("/")) {
    const under = files.filter((f) => basename(f) === clean);
    return under.find((f) => f.startsWith(fromDir)) ?? under[0];
  }
  return undefined;
}

/** Text outside fenced code blocks, and the fenced blocks' text. */
function split(text: string): { prose: string; code: string } {
  const prose: string[] = [];
  const code: string[] = [];
  let fenced = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    else (fenced ? code : prose).push(line);
  }
  return { prose: prose.join("\n"), code: code.join("\n") };
}

const codeSpans = (prose: string) => [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] ?? "");

/** Not files of this repository: runtime state, build output, globs, placeholders, other machines' paths. */
const notARepoPath = (s: string) =>
  /[*<>{}$…\s]|^(\.|dist\/|node_modules|~|\/|DIR\/)|^[a-z]+:/.test(s) || /(^|\/)(service|ports)\.json$|\.cdx\.json$/.test(s);

const looksLikePath = (s: string) =>
  /^[\w.@-]+(\/[\w.@-]+)*\/?$/.test(s) &&
  (/\.(ts|js|mjs|md|yaml|yml|json|lua|sh|sql)$/.test(s) ||
    /^(src|test|bench|docs|deploy|scripts|examples|crds|bin)\//.test(s));

/**
 * Files and directories a doc names (links, and code spans that look like paths) that do not exist, and links to
 * headings that do not exist. `pending` lists files other work will add (the check passes while they are absent).
 */
export function brokenPaths(doc: string, pending: ReadonlySet<string>, text = read(doc)): string[] {
  const dir = dirname(doc) === "." ? "" : dirname(doc);
  const { prose } = split(text);
  const broken: string[] = [];
  const withoutCode = prose.replace(/`[^`\n]*`/g, "");
  for (const m of withoutCode.matchAll(/\]\(([^)\s]+)\)/g)) {
    const [target = "", anchor] = (m[1] ?? "").split("#");
    if (/^[a-z]+:/.test(target)) continue;
    const file = target === "" ? doc : resolvePath(dir, target);
    if (file === undefined) {
      if (!pending.has(normalize(join(dir, target)))) broken.push(`${doc}: link ${m[1]}`);
      continue;
    }
    if (anchor && file.endsWith(".md") && !anchorsOf(file).has(anchor)) broken.push(`${doc}: link ${m[1]} (no heading)`);
  }
  for (const span of codeSpans(prose)) {
    const name = span.replace(/:\d+$/, "").replace(/[.,;:]$/, "");
    if (!looksLikePath(name) || notARepoPath(name)) continue;
    // A test named without its extension (`test/security/adoption`) is its .test.ts file.
    const exists = resolvePath(dir, name) ?? resolvePath(dir, `${name}.test.ts`);
    if (exists === undefined && !pending.has(name)) broken.push(`${doc}: path ${span}`);
  }
  return broken;
}

const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);

/** `npm run <script>` (and `npm start`, `npm test`) naming a script package.json does not have. */
export function brokenScripts(doc: string, text = read(doc)): string[] {
  const broken: string[] = [];
  for (const m of text.matchAll(/\bnpm (?:run (?:-s )?([\w:.-]+)|(start|test)\b)/g)) {
    const name = m[1] ?? m[2] ?? "";
    if (!scripts.includes(name)) broken.push(`${doc}: npm script ${name}`);
  }
  return broken;
}

/** Flags of other programs (kubectl, npm, psql, node, podman, …) that docs use; ours must appear in the source. */
const otherToolsFlags = new Set([
  "all-namespaces",
  "field-selector",
  "from-literal",
  "from-file",
  "overwrite",
  "server-side",
  "dry-run",
  "cascade",
  "env-file",
  "force-conflicts",
  "help",
  "version",
  "output",
  "selector",
  "watch",
  "template",
  "context",
  "no-owner",
  "owner",
  "no-acl",
  "acl",
  "jobs",
  "jitless",
  // node and V8 (bench/history's memory measurements) and tsc
  "single-threaded-gc",
  "single-threaded",
  "v8-pool-size",
  "max-lazy",
  "sparkplug",
  "lite-mode",
  "trace-gc",
]);

/** `--flag` in code spans and code blocks that no program of this repository (or a listed tool) knows. */
export function brokenFlags(doc: string, docText = read(doc)): string[] {
  const { prose, code } = split(docText);
  const text = `${codeSpans(prose).join("\n")}\n${code}`;
  const broken = new Set<string>();
  for (const m of text.matchAll(/(?:^|[\s[(`"'])--(?:no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)/g)) {
    const name = m[1] ?? "";
    if (otherToolsFlags.has(name)) continue;
    const known =
      [`--${name}`, `--no-${name}`, `"${name}":`, `"no-${name}":`, `flag: "${name}"`].some((s) => sourceText.includes(s)) ||
      new RegExp(`[{,\\s]${name}: \\{ type:`).test(sourceText);
    if (!known) broken.add(`${doc}: flag --${name}`);
  }
  return [...broken];
}

/** A string literal somewhere in src/: an Event reason, a phase, a condition type. */
const srcText = files
  .filter((f) => f.startsWith("src/") && f.endsWith(".ts"))
  .map(read)
  .join("\n");
const declaredReasons = new Set(conditionReasons().map((r) => r.reason));
const isReason = (name: string) => declaredReasons.has(name) || srcText.includes(`"${name}"`);

/**
 * Condition (or Event) reasons named after the word "reason(s)" (`reason \`X\``, `reasons \`X\`, \`Y\``) or in the
 * first column of a table whose first header is "reason", which the operator never writes.
 */
export function brokenReasons(doc: string, text = read(doc)): string[] {
  const { prose } = split(text);
  const names = new Set<string>();
  for (const m of prose.matchAll(/\breasons?\s+((?:`[A-Z][A-Za-z]+`(?:,\s*|\s+or\s+|\s+and\s+|\s*\/\s*)?)+)/g)) {
    for (const span of (m[1] ?? "").matchAll(/`([A-Z][A-Za-z]+)`/g)) names.add(span[1] ?? "");
  }
  let inReasonTable = false;
  for (const line of prose.split("\n")) {
    if (/^\| reason \|/.test(line)) inReasonTable = true;
    else if (!line.startsWith("|")) inReasonTable = false;
    const m = inReasonTable ? /^\| `([A-Za-z]+)` \|/.exec(line) : null;
    if (m?.[1]) names.add(m[1]);
  }
  return [...names].filter((n) => !isReason(n)).map((n) => `${doc}: reason ${n}`);
}

/** Code spans of the form `name()` or `a.name(args)` whose function is defined nowhere in the source. */
export function brokenFunctions(doc: string, text = read(doc)): string[] {
  const broken: string[] = [];
  for (const span of codeSpans(split(text).prose)) {
    const m = /^(?:[A-Za-z_$][\w$]*\.)*([A-Za-z_$][\w$]*)\([^()]*\)$/.exec(span);
    const name = m?.[1];
    if (name === undefined) continue;
    if (!new RegExp(`\\b${name.replace(/\$/g, "\\$")}\\s*[(<=:]`).test(sourceText)) broken.push(`${doc}: function ${span}`);
  }
  return broken;
}

/** Source files whose comments cite a Markdown file (`docs/design.md#x`, `README.md, "Heading"`) that is not there. */
export function brokenCitations(): string[] {
  const broken: string[] = [];
  const sources = files.filter(
    (f) => /^(src|test|bench|scripts|bin|deploy|packages)\//.test(f) && /\.(ts|js|mjs|sh|yaml|lua)$/.test(f) && !f.startsWith("test/docs/"),
  );
  for (const file of sources) {
    const text = read(file);
    for (const m of text.matchAll(/(?<![\w}$/.>-])([\w./-]*[\w-]+\.md)(?![\w])(?:#([\w-]+)|,? "([^"\n]+)")?/g)) {
      const [, name = "", anchor, heading] = m;
      if (notARepoPath(name)) continue;
      const target = resolvePath(dirname(file), name);
      if (target === undefined) {
        broken.push(`${file}: ${name}`);
        continue;
      }
      const slug = anchor ?? heading?.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
      if (slug !== undefined && !anchorsOf(target).has(slug)) broken.push(`${file}: ${name}#${slug}`);
    }
  }
  return broken;
}

/**
 * Citations a reader of the repository cannot follow: a tracker's issue or task number, or the old "CONTRACT §n"
 * (the decisions are docs/decisions.md now). Dated benchmark records in bench/history and their index keep theirs.
 */
export function unfollowableCitations(): string[] {
  const cited = /\b(?:CONTRACT §\d+|[Ii]ssues? \d+|[Tt]asks? \d+)/;
  const checked = files.filter(
    (f) =>
      !f.startsWith("test/docs/") &&
      !f.startsWith("bench/history/") &&
      f !== "BENCHMARKS.md" &&
      (docFiles().includes(f) || (/^(src|test|bench|scripts|bin|deploy|packages|dev)\//.test(f) && /\.(ts|js|mjs|sh|yaml|lua)$/.test(f))),
  );
  const found: string[] = [];
  for (const file of checked)
    read(file)
      .split("\n")
      .forEach((line, i) => {
        const m = cited.exec(line);
        if (m) found.push(`${file}:${i + 1}: ${m[0]}`);
      });
  return found;
}
