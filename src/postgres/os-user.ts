import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { PostgresError } from "./errors.ts";

const run = promisify(execFile);

export type OsUser = { uid: number; gid: number };

/** When we are root, the unprivileged `postgres` user that runs initdb and the server; otherwise ourselves. */
export async function postgresOsUser(): Promise<OsUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const { stdout: uid } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
  } catch (err) {
    throw new PostgresError(
      "no_postgres_user",
      "cannot run PostgreSQL as root and there is no `postgres` OS user: create one (`useradd --system postgres`, or `apt-get install postgresql` does it) or run as a normal user",
      { cause: err },
    );
  }
}
