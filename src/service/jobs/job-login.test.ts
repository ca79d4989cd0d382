import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../../../test/support/test-service.ts";
import { withOwnerLogin, type DatabaseLogin } from "./job-login.ts";
import { createPool } from "../store/pool.ts";

// withOwnerLogin alone, on a real server: the first session of the job login is the program's; once it exists nobody
// logs in as the login again, whatever password tenant code sets on it, and any other session is ended.

let service: TestService;
let pool: pg.Pool;
const owner = "mds_jl_owner";
const database = "mds_jl";

beforeAll(async () => {
  service = await startTestService();
  pool = createPool(service.postgresUrl, 4);
  await pool.query(`CREATE ROLE ${owner} NOLOGIN`);
  await pool.query(`CREATE DATABASE ${database} OWNER ${owner}`);
  await pool.query(`REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await service?.stop();
});

function urlOf(login: DatabaseLogin, password = login.password): string {
  const u = new URL(service.postgresUrl);
  u.username = login.user;
  u.password = password;
  u.pathname = `/${database}`;
  return u.toString();
}

async function open(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  c.on("error", () => {});
  await c.connect();
  return c;
}

const sessionsOf = async (name: string) =>
  Number((await pool.query("SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1", [name])).rows[0].n);

describe("withOwnerLogin", () => {
  it("shuts the login once its first session is in, ends any other, and leaves nothing after", async () => {
    const name = "mds_job_900_restore";
    let program: pg.Client | undefined;
    await withOwnerLogin({ pool, adminUrl: service.postgresUrl, name, memberOf: [owner] }, async (login) => {
      program = await open(urlOf(login));
      // A second session opened at once, as if someone else had the password: it is refused, or ended soon after.
      const second = await open(urlOf(login)).catch((err: Error) => err);
      // Refused either way: NOLOGIN already set ("not permitted"), or also PASSWORD NULL (the password check fails first).
      if (second instanceof Error)
        expect(second.message).toMatch(/not permitted to log in|password authentication failed/);
      else {
        const ended = await new Promise<boolean>((resolve) => {
          second.once("error", () => resolve(true));
          setTimeout(() => resolve(false), 2000);
        });
        expect(ended).toBe(true);
      }
      // Tenant code in the program's session sets the login's password: it opens nothing.
      await program.query(`RESET ROLE; ALTER ROLE ${name} PASSWORD 'chosen-by-tenant'`);
      await expect(open(urlOf(login, "chosen-by-tenant"))).rejects.toThrow(/not permitted to log in/);
      // (The program's password is no longer the role's: PostgreSQL checks it before LOGIN.)
      await expect(open(urlOf(login))).rejects.toThrow(/password authentication failed/);
      // The program's own session goes on.
      expect((await program.query("SELECT 1 AS one")).rows[0].one).toBe(1);
      expect(await sessionsOf(name)).toBe(1);
    });
    expect(await sessionsOf(name)).toBe(0);
    expect((await pool.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [name])).rowCount).toBe(0);
    await program?.end().catch(() => {});
  });

  it("a retry after a crash ends the crashed attempt's sessions and settings before it logs in again", async () => {
    const name = "mds_job_901_restore";
    // What a crashed attempt leaves: the login with a session and a setting tenant code gave it.
    await pool.query(`CREATE ROLE ${name} LOGIN PASSWORD 'left-behind' IN ROLE ${owner}`);
    const leftover = await open(urlOf({ host: "", port: "", user: name, password: "left-behind", sslmode: "" }));
    await leftover.query(`ALTER ROLE ${name} SET statement_timeout = 1`);
    const leftoverEnded = new Promise<void>((resolve, reject) => {
      leftover.once("error", () => resolve());
      setTimeout(() => reject(new Error("the crashed attempt's session is still there")), 5000);
    });
    await withOwnerLogin({ pool, adminUrl: service.postgresUrl, name, memberOf: [owner] }, async (login) => {
      await leftoverEnded;
      const program = await open(urlOf(login));
      try {
        expect((await program.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("0");
        expect(await sessionsOf(name)).toBe(1);
      } finally {
        await program.end();
      }
    });
    await leftover.end().catch(() => {});
  });

  it("leaves the program's parallel workers alone (a restore's CREATE INDEX on a large table uses them)", async () => {
    const name = "mds_job_902_restore";
    await withOwnerLogin({ pool, adminUrl: service.postgresUrl, name, memberOf: [owner] }, async (login) => {
      const program = await open(urlOf(login));
      try {
        // The whole query in one parallel worker (the leader does none of it), for longer than the guard's rounds:
        // the worker's pg_stat_activity row carries the login's name, as a parallel index build's workers do.
        const force =
          Number((await program.query("SHOW server_version_num")).rows[0].server_version_num) >= 160000
            ? "debug_parallel_query"
            : "force_parallel_mode";
        await program.query(`SET ${force} = on; SET parallel_leader_participation = off`);
        const { rows } = await program.query(
          "SELECT count(*)::int AS n FROM generate_series(1, 3000000) g WHERE md5(g::text) <> ''",
        );
        expect(rows[0].n).toBe(3_000_000);
      } finally {
        await program.end();
      }
    });
  });
});
