import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, completedBackup, settledDatabase, sql, type Json } from "../service/helpers.ts";

// A restore runs the tenant's code (a CHECK constraint while COPY loads rows) in the session of the job's login.
// That code does RESET ROLE (back to the job login) and ALTER ROLE session_user PASSWORD …, which PostgreSQL lets any
// role do to itself (committed with the COPY). The tenant then watches pg_stat_activity (readable by everyone) for a session of a role that is
// a member of its owner role and is not its own login, and logs in as it with the password it chose: a login with
// no connection limit, no idle timeout and invisible to the API. The job login must refuse that login, and no
// session of it may outlive the job.

const stolenPassword = "taken-over-by-the-tenant";

/** Sessions of roles that share the tenant's owner role, other than the tenant's own login: what the tenant can see. */
const foreignMembersSql = `
  SELECT DISTINCT a.usename AS "user", a.datname AS database
  FROM pg_stat_activity a
  JOIN pg_roles r ON r.rolname = a.usename
  JOIN pg_auth_members m ON m.member = r.oid
  WHERE m.roleid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND a.usename <> session_user`;

for (const split of [false, true])
  describe(`tenant code run by a job cannot hand the tenant the job's login${split ? " (a restore in parallel passes)" : ""}`, () => {
    let service: TestService;
    let api: ReturnType<typeof client>;
    let project: Json;

    beforeAll(async () => {
      // Split: every pass of the restore runs as a login of its own, each must hold (src/service/jobs/dump.ts).
      service = await startTestService(split ? { service: { restoreSplitMinBytes: 0 } } : {});
      api = client(service, service.token);
      project = (await api("POST", "/v1/projects", { name: "thief" })).body.data;
      await settledDatabase(api, project.database.id);
      const url = project.database.connections[0].endpoints.direct.connectionString as string;
      await sql(
        url,
        `CREATE FUNCTION take_over(v int) RETURNS boolean LANGUAGE plpgsql AS $f$
     BEGIN
       IF v = 1 THEN
         BEGIN
           RESET ROLE;
           EXECUTE format('ALTER ROLE %I PASSWORD %L', session_user, '${stolenPassword}');
         EXCEPTION WHEN others THEN NULL;
         END;
       END IF;
       RETURN true;
     END $f$`,
      );
      // pg_restore loads a table it created in one transaction (COPY then COMMIT), so the new password holds only once the
      // COPY is over: an index expression, built later in its own transaction, keeps the job running for a while after.
      await sql(
        url,
        "CREATE FUNCTION linger(v int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN IF v = 1 THEN PERFORM pg_sleep(3); END IF; RETURN v; END $f$",
      );
      await sql(url, "CREATE TABLE loot (v int CHECK (take_over(v)))");
      await sql(url, "CREATE INDEX loot_linger ON loot ((linger(v)))");
      await sql(url, "INSERT INTO loot VALUES (1), (2)");
    }, 120_000);

    afterAll(async () => {
      await service?.stop();
    });

    it("POST /v1/databases/{id}/restore: the tenant never logs in as the job login, and the restore succeeds", async () => {
      const db = project.database;
      const direct = new URL(db.connections[0].endpoints.direct.connectionString as string);
      const backup = await completedBackup(api, db.id);
      const seen = new Set<string>();
      const takenOver = new Set<string>();
      const held: pg.Client[] = [];
      try {
        const res = await api("POST", `/v1/databases/${db.id}/restore`, {
          source: { type: "backup", databaseId: db.id, backupId: backup.id },
        });
        expect(res.status).toBe(200);
        // Until the job ends: every foreign member session the tenant sees, it tries to log in as.
        for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
          // A new session each round: the swap ends the tenant's sessions in its database.
          const sessions = await sql<{ user: string; database: string }>(direct.toString(), foreignMembersSql).catch(
            () => [],
          );
          for (const { user, database } of sessions) {
            seen.add(user);
            if (takenOver.has(user)) continue;
            const as = new URL(direct);
            as.username = user;
            as.password = stolenPassword;
            as.pathname = `/${database}`;
            const thief = new pg.Client({ connectionString: as.toString(), connectionTimeoutMillis: 5000 });
            thief.on("error", () => {});
            try {
              await thief.connect();
              await thief.query("SELECT 1");
              takenOver.add(user);
              held.push(thief);
            } catch {
              await thief.end().catch(() => {});
            }
          }
          const status = (await api("GET", `/v1/databases/${db.id}`)).body.data.status;
          if (status !== "recovering") break;
          await new Promise((r) => setTimeout(r, 50));
        }
        // The tenant did see the job's login (so the attack had its chance), and could not log in as it.
        expect(seen.size).toBeGreaterThan(0);
        expect([...takenOver]).toEqual([]);
        expect((await settledDatabase(api, db.id)).status).toBe("ready");
        expect(await sql(db.connections[0].endpoints.direct.connectionString, "SELECT v FROM loot ORDER BY v")).toEqual(
          [{ v: 1 }, { v: 2 }],
        );
        // Nothing of the job login is left: no role, and no session (a session taken over ends with the job at the latest).
        for (const user of seen) {
          expect(
            await sql(service.postgresUrl, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1", [
              user,
            ]),
          ).toEqual([{ n: 0 }]);
          expect(
            await sql(service.postgresUrl, "SELECT count(*)::int AS n FROM pg_roles WHERE rolname = $1", [user]),
          ).toEqual([{ n: 0 }]);
        }
      } finally {
        for (const c of held) await c.end().catch(() => {});
      }
    });
  });
