import type pg from "pg";
import { randomPassword, scramVerifier } from "../shared/crypto.ts";
import { ident, literal, revokeLoginRole } from "../placement/provisioner.ts";
import { inTransaction } from "../store/pool.ts";

// pg_dump and pg_restore never log in as the region's superuser: a tenant function they call (a CHECK constraint,
// a column default, a trigger, an index expression) could RESET ROLE and own the server. They log in as a login
// role created for the job that holds nothing but the tenant's own roles, so whatever tenant code does in that
// session, it does with the tenant's power.
//
// That tenant code can also RESET ROLE to the job login and set the job login's own password (PostgreSQL lets every
// role do that to itself), then log in as it from outside: a login with no connection limit and no idle timeout,
// invisible to the API. So the login is shut once the program is in: pg_dump and pg_restore (one job) open one
// session and never another. As soon as that session shows in pg_stat_activity the role becomes NOLOGIN (which a role
// cannot undo for itself), and until the job ends any other session of the role is ended. Tenant code runs only in
// the program's session, so no other session can have logged in with a password it chose before the first one
// existed; a password it sets later opens nothing.

/** Where and as whom a client program logs in. The password only ever goes to PGPASSWORD. */
export type DatabaseLogin = { host: string; port: string; user: string; password: string; sslmode: string };

type OwnerLoginInput = {
  /** Superuser pool of the region server (creates and drops the role; runs nothing inside a tenant database). */
  pool: pg.Pool;
  /** The region's admin URL: host, port and sslmode of the server (its credentials are not used). */
  adminUrl: string;
  /** Role name of the job login, e.g. `mds_job_<jobId>`; repeated after a crash, so the same job reuses it. */
  name: string;
  /** The database's owner role and, for a dump, the login roles that may own objects too. */
  memberOf: string[];
};

/**
 * Runs `fn` with a fresh login that is a member of `memberOf` only (never superuser, CREATEROLE, CREATEDB,
 * REPLICATION or BYPASSRLS, none of which a tenant role can hold or grant). `fn` must open exactly one session
 * with it, and that before anyone else: the login is shut (NOLOGIN) once that session exists, and any other session
 * of it is ended while `fn` runs. Afterwards the login is dropped and its sessions ended, whatever `fn` did; if
 * tenant code made the role own an object, it is left NOLOGIN.
 */
export async function withOwnerLogin<T>(input: OwnerLoginInput, fn: (login: DatabaseLogin) => Promise<T>): Promise<T> {
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  const role = ident(input.name);
  // A crashed attempt's login may still have sessions (its program outlived the worker) and settings tenant code gave
  // it: both go before the role logs in again, so the first session seen below is this attempt's.
  await revokeLoginRole(input.pool, input.name);
  await inTransaction(input.pool, async (client) => {
    const { rowCount } = await client.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [input.name]);
    const attributes = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD ${literal(verifier)}`;
    await client.query(rowCount ? `ALTER ROLE ${role} ${attributes}` : `CREATE ROLE ${role} ${attributes}`);
    if (rowCount) await client.query(`ALTER ROLE ${role} RESET ALL`);
    await client.query(`GRANT ${input.memberOf.map(ident).join(", ")} TO ${role}`);
  });
  const url = new URL(input.adminUrl);
  const guard = guardSingleSession(input.pool, input.name);
  try {
    const result = await fn({
      host: url.hostname,
      port: url.port || "5432",
      user: input.name,
      password,
      sslmode: url.searchParams.get("sslmode") ?? "prefer",
    });
    // A guard that failed (its server went away) may not have shut the login: the attempt fails rather than stand.
    await guard.stop();
    return result;
  } finally {
    await guard.stop().catch(() => {});
    await revokeLoginRole(input.pool, input.name);
  }
}

/**
 * Watches the sessions of login `name`: once the first one exists (the program's), makes the role NOLOGIN (with no
 * password), then keeps ending every other session of it until stopped. `stop()` resolves when the watch has ended and
 * rejects if it failed.
 */
function guardSingleSession(pool: pg.Pool, name: string): { stop(): Promise<void> } {
  let stopped = false;
  let wake = () => {};
  // Cut short by stop(): the job does not wait for the watch's next round.
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const sessions = async () =>
    (
      await pool.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'client backend' ORDER BY backend_start, pid",
        [name],
      )
    ).rows.map((r) => r.pid);
  const watch = (async () => {
    let program: number | undefined;
    while (!stopped && program === undefined) {
      program = (await sessions())[0];
      if (program === undefined) await sleep(10);
    }
    if (program === undefined) return;
    await pool.query(`ALTER ROLE ${ident(name)} NOLOGIN PASSWORD NULL`);
    // From here on no one logs in as `name`; a session that got in before the line above is not the program's. Only
    // sessions: the program's parallel workers (a CREATE INDEX on a large table, a parallel scan) carry its login's
    // name too, and ending one fails the program; another session's workers end with it.
    while (!stopped) {
      await pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> $2 AND backend_type = 'client backend'",
        [name, program],
      );
      await sleep(250);
    }
  })();
  watch.catch(() => {});
  return {
    async stop() {
      stopped = true;
      wake();
      await watch;
    },
  };
}

/**
 * Name of the login a job uses for `purpose` (one job may need two, e.g. a clone dumps one owner and restores
 * another), and for `pass` of it when a restore runs several pg_restore at once (dump.ts: one login per session).
 */
export const jobLoginName = (jobId: string, purpose: "dump" | "restore", pass = ""): string =>
  `mds_job_${jobId}_${purpose}${pass ? `_${pass}` : ""}`;

/** Every login of job `jobId` on the server of `pool`, whatever its purpose or pass: a job given up drops them all. */
export async function jobLoginsOf(pool: pg.Pool, jobId: string): Promise<string[]> {
  const prefix = `mds_job_${jobId}_`;
  const { rows } = await pool.query<{ rolname: string }>(
    "SELECT rolname FROM pg_roles WHERE left(rolname, length($1)) = $1",
    [prefix],
  );
  return rows.map((r) => r.rolname);
}
