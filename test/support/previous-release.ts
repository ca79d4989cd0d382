import { execFileSync } from "node:child_process";
import { mkdir, readFile, symlink } from "node:fs/promises";
import path from "node:path";

// The previous release, built from git history, for the tests and runs that put it beside this tree (the upgrade
// test, `npm run chaos -- --upgrade`). No worktree is registered: `git archive` writes the commit's files and nothing
// else, and the tree shares this checkout's node_modules when its dependencies are the same, which is checked.

/** The previous release: CHANGELOG.md's 0.1.0. */
export const previousRelease = { version: "0.1.0", commit: "257d2a5bba39c4f5fa8f578ea627fd60f1c4cd0e" };

export const repoRoot = path.resolve(import.meta.dirname, "../..");

/** This tree's version (package.json). */
export async function currentVersion(): Promise<string> {
  return (JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { version: string }).version;
}

/** Writes the previous release's files into `dir/mds-<version>`, with this checkout's node_modules; returns the tree. */
export async function buildPreviousRelease(dir: string): Promise<string> {
  const tree = path.join(dir, `mds-${previousRelease.version}`);
  await mkdir(tree);
  try {
    execFileSync("sh", ["-c", `git archive ${previousRelease.commit} | tar -x -C "${tree}"`], {
      cwd: repoRoot,
      stdio: "pipe",
    });
  } catch (err) {
    throw new Error(
      `cannot read ${previousRelease.version} (commit ${previousRelease.commit}) from git history: clone with full history (${(err as Error).message})`,
    );
  }
  // Its node_modules are this tree's: every package it declares must be here at the same version (this tree may
  // declare more).
  const deps = async (root: string) => {
    const p = JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as Record<string, unknown>;
    return { ...(p["dependencies"] as object), ...(p["devDependencies"] as object) } as Record<string, string>;
  };
  const here = await deps(repoRoot);
  const differing = Object.entries(await deps(tree)).filter(([name, version]) => here[name] !== version);
  if (differing.length > 0)
    throw new Error(
      `${previousRelease.version} needs other packages than this tree (${differing.map(([n, v]) => `${n}@${v}`).join(", ")}): npm ci in its tree first`,
    );
  await symlink(path.join(repoRoot, "node_modules"), path.join(tree, "node_modules"));
  return tree;
}

/**
 * The crash points a release's operator knows, from its own code (an operator armed with a name it does not know
 * exits with code 2). Asked in a child process, so that release's modules never mix with this tree's.
 */
export function crashPointsOf(tree: string): string[] {
  const out = execFileSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      "const m = await import(process.argv[1]); console.log(JSON.stringify(m.crashPoints()));",
      path.join(tree, "src/resources/index.ts"),
    ],
    { cwd: tree, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
  return JSON.parse(out) as string[];
}
