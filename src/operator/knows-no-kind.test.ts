import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { kindModules } from "../resources/index.ts";

// src/operator holds only what every kind shares: a kind is its folder in src/resources (src/resources/README.md,
// "Adding a kind"). This fails when the operator's code names a kind in an identifier or a string: a type or
// variable called Database, ctx.cache("Project"), a crash point "connection:after-create", a "database" label.
// Comments may name kinds (examples help a reader); code may not.

const operatorDir = fileURLToPath(new URL(".", import.meta.url));
/** The registered kinds, and the ones being added (so a new kind's name is refused before it is registered). */
const kinds = [...new Set([...kindModules.map((m) => m.definition.kind), "DatabaseBackup"])];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") && !path.endsWith(".test.ts") ? [path] : [];
  });
}

/** Whether `text` (an identifier, or a string's text) names one of `names`. */
function namesKind(text: string, identifier: boolean, names: readonly string[]): boolean {
  if (identifier) return names.includes(text);
  // "the connection Secret" is the Secret a resource publishes, not the Connection kind.
  const plain = text.replace(/connection Secret/gi, "Secret");
  return names.some((k) => new RegExp(`\\b${k}\\b|\\b${k.toLowerCase()}s?:|^${k.toLowerCase()}s?$`).test(plain));
}

/** Where `source` names a kind: `line: text` for each identifier or string that does. */
export function kindNamesIn(source: string, names: readonly string[] = kinds): string[] {
  const file = ts.createSourceFile("x.ts", source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    const identifier = ts.isIdentifier(node) || ts.isPrivateIdentifier(node);
    if (identifier || ts.isStringLiteralLike(node) || ts.isTemplateLiteralToken(node)) {
      const { text } = node as ts.Identifier | ts.StringLiteralLike | ts.TemplateLiteralToken;
      if (namesKind(text, identifier, names))
        found.push(`${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${text}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe("src/operator knows no kind", () => {
  it("finds a kind's name in identifiers and strings, not in comments", () => {
    expect(kindNamesIn(`// a Database's project\nconst x = ctx.cache("Database");`)).toEqual(["2: Database"]);
    expect(kindNamesIn(`await crashPoint("project:after-create");`)).toEqual(["1: project:after-create"]);
    expect(kindNamesIn("onChange(`database`, id);")).toEqual(["1: database"]);
    expect(kindNamesIn(`type Connection = { id: string };`)).toEqual(["1: Connection"]);
    expect(kindNamesIn(`throw new Error(\`\${kind} "\${name}" is a DatabaseBackup\`);`)).toEqual([
      '1: " is a DatabaseBackup',
    ]);
    expect(kindNamesIn(`const m = "the connection Secret was rebuilt"; const databaseId = 1;`)).toEqual([]);
  });

  it("has no kind named in its code", () => {
    // Words of PostgreSQL, not kinds: the Secret's template variable {{database}} is the database name, as libpq says.
    const notKinds = [/^secret\/spec\.ts:\d+: database$/];
    const named = sourceFiles(operatorDir)
      .flatMap((path) =>
        kindNamesIn(readFileSync(path, "utf8")).map((hit) => `${path.slice(operatorDir.length)}:${hit}`),
      )
      .filter((hit) => !notKinds.some((word) => word.test(hit)));
    expect(named).toEqual([]);
  });
});
