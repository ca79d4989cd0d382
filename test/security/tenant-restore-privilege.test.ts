import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, completedBackup, eventually, settledDatabase, sql, type Json } from "../service/helpers.ts";

// A tenant holds only its connection string and token. It plants a SECURITY INVOKER function that a restore calls
// (through a CHECK constraint while COPY loads rows, and through an index expression while the index is built). The
// function does RESET ROLE and then tries what only a superuser can: make the tenant's login role SUPERUSER and
// write a file on the server (COPY … TO a file). If pg_restore ran as a superuser and only SET ROLE to the owner,
// RESET ROLE would hand the function that superuser session. Both restore paths are attacked: POST …/restore and
// creating a database from a backup.

let service: TestService;
let api: ReturnType<typeof client>;
let project: Json;
// Written by the server relative to its data directory, seen through pg_stat_file.
const proofFile = "mds-escalated.txt";

/** What the attack would have achieved: a superuser among the service's roles, or a file written by the server. */
async function escalations(): Promise<unknown[]> {
  const supers = await sql(
    service.postgresUrl,
    "SELECT rolname FROM pg_roles WHERE rolsuper AND rolname LIKE 'mds\\_%'",
  );
  const files = await sql(
    service.postgresUrl,
    "SELECT 'file written' AS proof WHERE (pg_stat_file($1, true)).size IS NOT NULL",
    [proofFile],
  );
  return [...supers, ...files];
}

async function removeProof(): Promise<void> {
  await sql(service.postgresUrl, `COPY (SELECT 1 WHERE false) TO PROGRAM 'rm -f ${proofFile}'`);
}

for (const split of [false, true])
  describe(`a tenant function called by a restore cannot reach the superuser${split ? " (in parallel runs)" : ""}`, () => {
    beforeAll(async () => {
      // Split: a restore (and a clone) in parallel runs, each as a login of its own (src/service/jobs/dump.ts).
      service = await startTestService(split ? { service: { restoreSplitMinBytes: 0 } } : {});
      api = client(service, service.token);
      project = (await api("POST", "/v1/projects", { name: "attacker" })).body.data;
      await settledDatabase(api, project.database.id);
      const url = project.database.connectionString as string;
      const [me] = await sql<{ login: string; owner: string }>(
        url,
        "SELECT session_user AS login, current_user AS owner",
      );
      await sql(
        url,
        `CREATE FUNCTION escalate(v int) RETURNS boolean LANGUAGE plpgsql AS $f$
     BEGIN
       BEGIN
         RESET ROLE;
         EXECUTE 'ALTER ROLE ${me!.login} SUPERUSER';
       EXCEPTION WHEN others THEN NULL;
       END;
       BEGIN
         RESET ROLE;
         EXECUTE format('COPY (SELECT current_user) TO %L', current_setting('data_directory') || '/${proofFile}');
       EXCEPTION WHEN others THEN NULL;
       END;
       RETURN v IS NOT NULL;
     END $f$`,
      );
      await sql(url, "CREATE TABLE guarded (v int CHECK (escalate(v)))");
      // An index expression must be IMMUTABLE: a wrapper that says so calls the volatile function.
      await sql(
        url,
        "CREATE FUNCTION escalate_immutable(v int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN RETURN public.escalate(v); END $f$",
      );
      await sql(url, "CREATE INDEX guarded_expr ON guarded ((escalate_immutable(v)))");
      await sql(url, "INSERT INTO guarded VALUES (1), (2)");
      expect(await escalations()).toEqual([]);
      // The planted function really escalates in a superuser session that SET ROLE to the owner (what
      // pg_restore --role did): checked in a transaction that is rolled back (the file is removed by hand).
      // The direct endpoint: PgBouncer's lookup never answers for a superuser.
      const superUrl = new URL(project.database.connections[0].endpoints.direct.connectionString as string);
      const admin = new URL(service.postgresUrl);
      superUrl.username = admin.username;
      superUrl.password = admin.password;
      const c = new pg.Client({ connectionString: superUrl.toString() });
      await c.connect();
      try {
        await c.query("BEGIN");
        await c.query(`SET ROLE "${me!.owner}"`);
        await c.query("SELECT escalate(1)");
        expect((await c.query("SELECT rolsuper FROM pg_roles WHERE rolname = $1", [me!.login])).rows[0].rolsuper).toBe(
          true,
        );
      } finally {
        await c.query("ROLLBACK").catch(() => {});
        await c.end();
      }
      expect(await escalations()).toEqual([{ proof: "file written" }]);
      await removeProof();
      expect(await escalations()).toEqual([]);
    }, 120_000);

    afterAll(async () => {
      await service?.stop();
    });

    // Each attack is judged on its own: undo whatever the previous one achieved.
    afterEach(async () => {
      for (const { rolname } of await sql<{ rolname: string }>(
        service.postgresUrl,
        "SELECT rolname FROM pg_roles WHERE rolsuper AND rolname LIKE 'mds\\_%'",
      )) {
        await sql(service.postgresUrl, `ALTER ROLE "${rolname}" NOSUPERUSER`);
      }
      await removeProof();
    });

    it("POST /v1/databases/{id}/restore: nothing escalates and the restore succeeds", async () => {
      const db = project.database;
      const backup = await completedBackup(api, db.id);
      await sql(db.connectionString, "INSERT INTO guarded VALUES (3)");
      const res = await api("POST", `/v1/databases/${db.id}/restore`, {
        source: { type: "backup", databaseId: db.id, backupId: backup.id },
      });
      expect(res.status).toBe(200);
      const final = await settledDatabase(api, db.id);
      expect(await escalations()).toEqual([]);
      expect(final.status).toBe("ready");
      expect(await sql(db.connectionString, "SELECT v FROM guarded ORDER BY v")).toEqual([{ v: 1 }, { v: 2 }]);
    });

    it("creating a database from the backup: nothing escalates and the copy has the data", async () => {
      const db = project.database;
      const backup = await completedBackup(api, db.id);
      const res = await api("POST", `/v1/projects/${project.id}/databases`, {
        name: "copy",
        source: { type: "backup", databaseId: db.id, backupId: backup.id },
      });
      expect(res.status).toBe(201);
      const final = await settledDatabase(api, res.body.data.id);
      expect(await escalations()).toEqual([]);
      expect(final.status).toBe("ready");
      expect(await sql(res.body.data.connectionString, "SELECT count(*)::int AS n FROM guarded")).toEqual([{ n: 2 }]);
    });

    it("cloning the database: nothing escalates and the clone has the data", async () => {
      const db = project.database;
      const res = await api("POST", "/v1/databases", {
        projectId: project.id,
        name: "clone",
        region: "inherit",
        source: { type: "database", databaseId: db.id },
      });
      expect(res.status).toBe(201);
      const final = await settledDatabase(api, res.body.data.id);
      expect(await escalations()).toEqual([]);
      expect(final.status).toBe("ready");
      const cloneUrl = res.body.data.connections[0].endpoints.direct.connectionString as string;
      expect(await sql(cloneUrl, "SELECT count(*)::int AS n FROM guarded")).toEqual([{ n: 2 }]);
    });

    it("a restore marker the tenant plants on its database does not make the next restore skip its work", async () => {
      const db = project.database;
      const backup = await completedBackup(api, db.id);
      await sql(db.connectionString, "INSERT INTO guarded VALUES (4)");
      // The tenant owns its database, so it may comment on it: it writes what a finished swap of the next job leaves.
      const [next] = await sql<{ id: string }>(service.controlUrl, "SELECT (max(id) + 1)::text AS id FROM jobs");
      await sql(
        db.connectionString,
        `DO $$ BEGIN EXECUTE format('COMMENT ON DATABASE %I IS %L', current_database(), 'mds:restore:${next!.id}'); END $$`,
      );
      const res = await api("POST", `/v1/databases/${db.id}/restore`, {
        source: { type: "backup", databaseId: db.id, backupId: backup.id },
      });
      expect(res.status).toBe(200);
      expect((await settledDatabase(api, db.id)).status).toBe("ready");
      expect(await sql(db.connectionString, "SELECT count(*)::int AS n FROM guarded WHERE v = 4")).toEqual([{ n: 0 }]);
    });

    it("leaves no job login behind once the jobs end", async () => {
      await eventually(async () =>
        expect(
          await sql(service.postgresUrl, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'mds\\_job\\_%'"),
        ).toEqual([]),
      );
    });
  });
