import { execFile } from "node:child_process";
import { access, constants, readdir } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { PostgresNotFoundError } from "./errors.ts";

const run = promisify(execFile);

export type PostgresBinaries = { bindir: string; version: number };

/** The programs we need in one bindir: a server is useless without the tools that back it up. */
export const requiredPrograms = ["initdb", "postgres", "pg_dump", "pg_restore"] as const;

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function hasAll(bindir: string): Promise<boolean> {
  for (const program of requiredPrograms) if (!(await isExecutable(path.join(bindir, program)))) return false;
  return true;
}

async function versionOf(bindir: string): Promise<number | undefined> {
  try {
    const { stdout } = await run(path.join(bindir, "postgres"), ["--version"], { timeout: 10_000 });
    const match = /(\d+)(?:\.\d+)?/.exec(stdout);
    return match?.[1] === undefined ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

export type FindOptions = { searchPath?: string; pgConfig?: string; libRoot?: string };

async function candidates(searchPath: string, pgConfig: string, libRoot: string): Promise<string[]> {
  const dirs: string[] = [];
  // PATH may hold symlinks (e.g. /usr/local/bin/initdb): resolve to the real bindir through postgres' own location.
  for (const dir of searchPath.split(path.delimiter).filter(Boolean)) dirs.push(dir);
  try {
    const { stdout } = await run(pgConfig, ["--bindir"], { timeout: 10_000 });
    if (stdout.trim()) dirs.push(stdout.trim());
  } catch {
    // pg_config is optional: Debian's postgresql-common does not always put it on PATH.
  }
  try {
    for (const entry of await readdir(libRoot)) dirs.push(path.join(libRoot, entry, "bin"));
  } catch {
    // not a Debian layout
  }
  return dirs;
}

/**
 * Finds a directory holding initdb, postgres, pg_dump and pg_restore: PATH, `pg_config --bindir`,
 * `/usr/lib/postgresql/<version>/bin`; the highest version wins.
 */
export async function findPostgresBinaries(options: FindOptions = {}): Promise<PostgresBinaries> {
  const found: PostgresBinaries[] = [];
  const seen = new Set<string>();
  // PATH is part of the process environment the caller gave us, like the binaries themselves.
  for (const dir of await candidates(
    options.searchPath ?? process.env.PATH ?? "",
    options.pgConfig ?? "pg_config",
    options.libRoot ?? "/usr/lib/postgresql",
  )) {
    if (seen.has(dir)) continue;
    seen.add(dir);
    if (!(await hasAll(dir))) continue;
    const version = await versionOf(dir);
    if (version !== undefined) found.push({ bindir: dir, version });
  }
  found.sort((a, b) => b.version - a.version);
  const best = found[0];
  if (!best) {
    throw new PostgresNotFoundError(
      `cannot find PostgreSQL server binaries: need ${requiredPrograms.join(", ")} in one directory ` +
        `(searched PATH, \`pg_config --bindir\` and /usr/lib/postgresql/*/bin); install them with \`apt-get install postgresql\``,
    );
  }
  return best;
}
