// `npm run lint` (so `npm test`) runs this: an export that no other file imports is dead code or a name that should
// not be exported, and either way a newcomer reads it as something the rest of the code relies on. It reads the
// TypeScript program of tsconfig.json (src/, packages/, dev/, test/, bench/, scripts/), marks every export that
// another file imports (named, default, namespace, re-exported, dynamic `import()` or `import("…")` type), and fails
// on the exports of the checked folders (unused-exports.config.ts) that nothing imports. A use inside the exporting
// file does not count. Prints file:line name for each.
import path from "node:path";
import ts from "typescript";
import * as config from "./unused-exports.config.ts";

interface Options {
  /** The folder holding tsconfig.json; file names are relative to it. */
  root: string;
  checked: string[];
  entryPoints: string[];
  allowed: { file: string; export: string; why: string }[];
}

function program(root: string): ts.Program {
  const configPath = path.join(root, "tsconfig.json");
  const config = ts.readConfigFile(configPath, (f) => ts.sys.readFile(f));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  return ts.createProgram(parsed.fileNames, { ...parsed.options, noEmit: true });
}

/** file → the export names other files import from it ("*": all of them, as `import * as`, `export *` and import() do). */
function importedExports(prog: ts.Program): Map<string, Set<string>> {
  const checker = prog.getTypeChecker();
  const used = new Map<string, Set<string>>();
  // `export * from "./x"` in a barrel: a name imported from the barrel is a use of x's export.
  const starExports = new Map<string, ts.SourceFile[]>();
  const fileOf = (specifier: ts.Node | undefined) =>
    (specifier ? checker.getSymbolAtLocation(specifier) : undefined)?.declarations?.[0]?.getSourceFile();
  const mark = (specifier: ts.Node | undefined, name: string, from: ts.SourceFile) => {
    const file = fileOf(specifier);
    if (file === undefined || file === from) return;
    const names = used.get(file.fileName) ?? new Set<string>();
    names.add(name);
    used.set(file.fileName, names);
  };
  for (const file of prog.getSourceFiles()) {
    if (file.isDeclarationFile || file.fileName.includes("/node_modules/")) continue;
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node)) {
        const clause = node.importClause;
        if (clause?.name) mark(node.moduleSpecifier, "default", file);
        const bindings = clause?.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings)) mark(node.moduleSpecifier, "*", file);
        if (bindings && ts.isNamedImports(bindings))
          for (const e of bindings.elements) mark(node.moduleSpecifier, (e.propertyName ?? e.name).text, file);
      } else if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
        const clause = node.exportClause;
        const target = fileOf(node.moduleSpecifier);
        if (clause === undefined && target)
          starExports.set(file.fileName, [...(starExports.get(file.fileName) ?? []), target]);
        else if (clause === undefined || ts.isNamespaceExport(clause)) mark(node.moduleSpecifier, "*", file);
        else for (const e of clause.elements) mark(node.moduleSpecifier, (e.propertyName ?? e.name).text, file);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        mark(node.arguments[0], "*", file);
      } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
        mark(node.argument.literal, "*", file);
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  // Through barrels, to a fixed point: what is imported from a barrel is imported from the file it re-exports.
  for (let changed = true; changed;) {
    changed = false;
    for (const [barrel, targets] of starExports) {
      const names = used.get(barrel);
      if (names === undefined) continue;
      for (const target of targets) {
        const targetSymbol = checker.getSymbolAtLocation(target);
        const exported = targetSymbol ? checker.getExportsOfModule(targetSymbol).map((e) => e.name) : [];
        const targetNames = used.get(target.fileName) ?? new Set<string>();
        for (const name of exported.filter((n) => names.has("*") || names.has(n))) {
          if (!targetNames.has(name)) {
            targetNames.add(name);
            changed = true;
          }
        }
        used.set(target.fileName, targetNames);
      }
    }
  }
  return used;
}

/** The exports of the checked folders that no other file imports ("file:line name"), and the stale allowances. */
export function unusedExports({ root, checked, entryPoints, allowed }: Options): {
  findings: string[];
  stale: string[];
} {
  const relative = (file: string) => path.relative(root, file).split(path.sep).join("/");
  const prog = program(root);
  const checker = prog.getTypeChecker();
  const used = importedExports(prog);
  const findings: string[] = [];
  const allowedSeen = new Set<(typeof allowed)[number]>();
  for (const file of prog.getSourceFiles()) {
    const name = relative(file.fileName);
    if (!checked.some((dir) => name.startsWith(dir)) || name.endsWith(".test.ts") || entryPoints.includes(name))
      continue;
    const moduleSymbol = checker.getSymbolAtLocation(file);
    if (moduleSymbol === undefined) continue;
    const imported = used.get(file.fileName) ?? new Set<string>();
    if (imported.has("*")) continue;
    if (!used.has(file.fileName) && checker.getExportsOfModule(moduleSymbol).length > 0) {
      if (allowed.some((a) => a.file === name && a.export === "*")) continue;
      findings.push(`${name}:1 * (no file imports this module)`);
      continue;
    }
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      if (imported.has(exported.name)) continue;
      const allowance = allowed.find((a) => a.file === name && a.export === exported.name);
      if (allowance) {
        allowedSeen.add(allowance);
        continue;
      }
      const declaration = exported.declarations?.[0];
      // A name a barrel passes on with `export *` is checked where it is declared.
      if (declaration !== undefined && declaration.getSourceFile() !== file) continue;
      const line = declaration ? file.getLineAndCharacterOfPosition(declaration.getStart()).line + 1 : 0;
      findings.push(`${name}:${line} ${exported.name}`);
    }
  }
  const stale = allowed.filter((a) => !allowedSeen.has(a)).map((a) => `${a.file} ${a.export}`);
  return { findings: findings.sort(), stale };
}

if (import.meta.main) report(unusedExports({ root: path.resolve(import.meta.dirname, ".."), ...config }));

function report({ findings, stale }: { findings: string[]; stale: string[] }): void {
  if (findings.length > 0 || stale.length > 0) {
    if (findings.length > 0)
      console.error(
        `unused exports: ${findings.length} export(s) that no other file imports. Remove them, or stop exporting them ` +
          `(or, for a reason, list them in scripts/unused-exports.config.ts):\n  ${findings.join("\n  ")}`,
      );
    if (stale.length > 0)
      console.error(
        `unused exports: allowed in scripts/unused-exports.config.ts but imported or gone now (remove the entry):\n  ${stale.join("\n  ")}`,
      );
    process.exitCode = 1;
  }
}
