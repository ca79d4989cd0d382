import type pg from "pg";
import { randomPassword, scramVerifier } from "./crypto.ts";
import { ident, literal, revokeLoginRole } from "./provisioner.ts";
import { inTransaction } from "./store/pool.ts";

// pg_dump and pg_restore never log in as the region's superuser: a tenant function they call (a CHECK constraint,
// a column default, a trigger, an index expression) could RESET ROLE and own the server. They log in as a login
// role created for the job that holds nothing but the tenant's own roles, so whatever tenant code does in that
// session, it does with the tenant's power.

/** Where and as whom a client program logs in. The password only ever goes to PGPASSWORD. */
export type DatabaseLogin = { host: string; port: string; user: string; password: string; sslmode: string };

export type OwnerLoginInput = {
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
 * REPLICATION or BYPASSRLS, none of which a tenant role can hold or grant). Afterwards the login is dropped and its
 * sessions ended, whatever `fn` did; if tenant code made the role own an object, it is left NOLOGIN.
 */
export async function withOwnerLogin<T>(input: OwnerLoginInput, fn: (login: DatabaseLogin) => Promise<T>): Promise<T> {
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  const role = ident(input.name);
  await inTransaction(input.pool, async (client) => {
    const { rowCount } = await client.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [input.name]);
    const attributes = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD ${literal(verifier)}`;
    await client.query(rowCount ? `ALTER ROLE ${role} ${attributes}` : `CREATE ROLE ${role} ${attributes}`);
    await client.query(`GRANT ${input.memberOf.map(ident).join(", ")} TO ${role}`);
  });
  const url = new URL(input.adminUrl);
  try {
    return await fn({ host: url.hostname, port: url.port || "5432", user: input.name, password, sslmode: url.searchParams.get("sslmode") ?? "prefer" });
  } finally {
    await revokeLoginRole(input.pool, input.name);
  }
}

/** Name of the login a job uses for `purpose` (one job may need two, e.g. a clone dumps one owner and restores another). */
export const jobLoginName = (jobId: string, purpose: "dump" | "restore"): string => `mds_job_${jobId}_${purpose}`;
