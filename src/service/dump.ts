import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rename, rm, stat } from "node:fs/promises";
import path from "node:path";

// pg_dump and pg_restore as child processes. The password goes through PGPASSWORD, never argv, so it
// cannot show in `ps` or in an error message that quotes the command.

function connectionEnv(adminUrl: string, database: string): Record<string, string> {
  const url = new URL(adminUrl);
  return {
    PGHOST: url.hostname,
    PGPORT: url.port || "5432",
    PGUSER: decodeURIComponent(url.username),
    PGPASSWORD: decodeURIComponent(url.password),
    PGDATABASE: database,
    PGSSLMODE: url.searchParams.get("sslmode") ?? "prefer",
    PGCONNECT_TIMEOUT: "10",
  };
}

function run(program: string, args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(program)} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`));
    });
  });
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Dumps `database` into `file` (custom format), atomically: the file appears complete or not at all. */
export async function dumpDatabase(input: { bindir: string; adminUrl: string; database: string; file: string }): Promise<{ size: number; sha256: string }> {
  const tmp = `${input.file}.partial`;
  await rm(tmp, { force: true });
  try {
    // -Z1: dumps are compressed cheaply; the restore side pays the inflating.
    await run(path.join(input.bindir, "pg_dump"), ["-Fc", "-Z1", "--no-owner", "--no-acl", "-f", tmp], connectionEnv(input.adminUrl, input.database));
    // A backup nobody can read is worse than none: pg_restore must be able to list the archive's contents.
    await run(path.join(input.bindir, "pg_restore"), ["--list", tmp], {});
    const handle = await open(tmp, "r");
    await handle.sync();
    await handle.close();
    await rename(tmp, input.file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return { size: (await stat(input.file)).size, sha256: await sha256File(input.file) };
}

export async function verifyArchive(file: string, sha256: string): Promise<void> {
  const actual = await sha256File(file);
  if (actual !== sha256) throw new Error("backup archive is corrupt (checksum mismatch)");
}

/** Restores `file` into the existing, empty `database`; objects are created as `role`, so they belong to its owner. */
export async function restoreDatabase(input: { bindir: string; adminUrl: string; database: string; file: string; role: string; jobs?: number }): Promise<void> {
  await run(
    path.join(input.bindir, "pg_restore"),
    ["--no-owner", "--no-acl", `--role=${input.role}`, "--exit-on-error", `--jobs=${input.jobs ?? 2}`, "-d", input.database, input.file],
    connectionEnv(input.adminUrl, input.database),
  );
}
