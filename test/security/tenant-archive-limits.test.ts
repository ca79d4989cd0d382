import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runMaintenance } from "../../src/service/jobs/scheduler.ts";
import { databaseComment } from "../../src/service/placement/provisioner.ts";
import type { ServiceDeps } from "../../src/service/runtime/deps.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// What a tenant stores decides how large its archive's table of contents is (26,000 functions with long signatures
// printed a `pg_restore --list` past V8's longest string and took the service down, five times per request). The
// listing is now read as it streams, and past `archiveEntryLimit` objects the job fails for good, once, with the
// limit named. Failed attempts count against the workspace's budget (`failedJobAttemptsPerWorkspace`): past it the
// requests that start costly jobs are 409, for that workspace only.

const limit = 40;

describe("a tenant's archive past the service's limits", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      service: { archiveEntryLimit: limit, failedJobAttemptsPerWorkspace: 2, jobMaxAttempts: 5 },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  async function readyDatabase(api: ReturnType<typeof client>, name: string) {
    const created = (await api("POST", "/v1/projects", { name })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"));
    return {
      id,
      projectId: created.id as string,
      url: created.database.connections[0].endpoints.direct.connectionString as string,
    };
  }

  const backupJobs = (backupId: string) =>
    sql<{ state: string; error: string; runs: string[] }>(
      service.controlUrl,
      `SELECT j.state, j.error, (SELECT array_agg(r.outcome ORDER BY r.id) FROM job_runs r WHERE r.job_id = j.id) AS runs
         FROM jobs j WHERE j.kind = 'backup' AND j.payload->>'backupId' = $1`,
      [backupId],
    );

  it("fails the backup once, naming the limit, then refuses that workspace's costly requests past its budget", async () => {
    const api = client(service, await service.createToken("many-objects"));
    const { id, projectId, url } = await readyDatabase(api, "objects");
    // A backup from before the database grew past the limit.
    const good = (await api("POST", `/v1/databases/${id}/backups`)).body.data.id as string;
    await eventually(async () => {
      const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
      expect(list.find((b) => b.id === good)?.status).toBe("completed");
    });
    await sql(
      url,
      `DO $$ BEGIN FOR i IN 1..${limit + 10} LOOP
         EXECUTE format('CREATE FUNCTION f%s(a integer) RETURNS integer LANGUAGE sql AS ''SELECT a''', i);
       END LOOP; END $$`,
    );
    for (const attempt of [1, 2]) {
      const taken = await api("POST", `/v1/databases/${id}/backups`);
      expect(taken.status, `attempt ${attempt}`).toBe(201);
      const backupId = taken.body.data.id as string;
      await eventually(async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(list.find((b) => b.id === backupId)?.status).toBe("failed");
      });
      // Failed for good at its first attempt: a retry would meet the same limit.
      expect(await backupJobs(backupId)).toEqual([
        {
          state: "failed",
          error: `the backup archive lists more than ${limit} objects, the most this service dumps or restores (archiveEntryLimit)`,
          runs: ["failed"],
        },
      ]);
    }
    // The service answers, and this database is as it was.
    expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready");

    // Two failed attempts in 24 hours: the workspace's budget is spent for every request that starts a costly job.
    const budget = (what: string) =>
      `cannot ${what}: this workspace's jobs failed 2 times in the last 24 hours, its limit is 2`;
    const refusals: [Promise<Json>, string][] = [
      [api("POST", `/v1/databases/${id}/backups`), budget("take a backup")],
      [
        api("POST", `/v1/databases/${id}/restore`, { source: { type: "backup", databaseId: id, backupId: good } }),
        budget("restore a database"),
      ],
      [
        api("POST", `/v1/projects/${projectId}/databases`, { source: { type: "database", databaseId: id } }),
        budget("create a database from a source"),
      ],
      [
        api("POST", `/v1/projects/${projectId}/databases`, {
          source: { type: "backup", databaseId: id, backupId: good },
        }),
        budget("create a database from a source"),
      ],
    ];
    for (const [request, message] of refusals) {
      const res = await request;
      expect(res.status, message).toBe(409);
      expect(res.body.error.message).toBe(message);
      expect(res.body.error.hint).toMatch(/failedJobAttemptsPerWorkspace/);
    }
    // What costs no job still works.
    expect((await api("POST", `/v1/projects/${projectId}/databases`, { name: "empty" })).status).toBe(201);

    // Another workspace is not affected.
    const other = client(service, await service.createToken("neighbour"));
    const { id: otherId } = await readyDatabase(other, "neighbour");
    const theirs = await other("POST", `/v1/databases/${otherId}/backups`);
    expect(theirs.status).toBe(201);
    await eventually(async () => {
      const list = (await other("GET", `/v1/databases/${otherId}/backups`)).body.data as Json[];
      expect(list[0].status).toBe("completed");
    });
  });

  it("takes no daily backup of a spent workspace, nor again the same day of a database whose daily backup failed", async () => {
    const spent = client(service, await service.createToken("spent"));
    const fresh = client(service, await service.createToken("fresh"));
    const { id: spentDb, url } = await readyDatabase(spent, "spent");
    const { id: freshDb } = await readyDatabase(fresh, "fresh");
    const { id: failedDailyDb } = await readyDatabase(fresh, "failed-daily");
    await sql(
      url,
      `DO $$ BEGIN FOR i IN 1..${limit + 10} LOOP
         EXECUTE format('CREATE FUNCTION g%s() RETURNS integer LANGUAGE sql AS ''SELECT 1''', i);
       END LOOP; END $$`,
    );
    for (const attempt of [1, 2]) {
      const backupId = (await spent("POST", `/v1/databases/${spentDb}/backups`)).body.data.id as string;
      await eventually(async () => expect((await backupJobs(backupId))[0]?.state, `attempt ${attempt}`).toBe("failed"));
    }
    // A daily backup of this database failed an hour ago (after its retries).
    await sql(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger, created_at) VALUES ('bkp_cfaileddailybackup0000001', $1, 'failed', 'daily', now() - interval '1 hour')",
      [failedDailyDb],
    );
    const deps = {
      pool: createPool(service.controlUrl, 2),
      config: { backupRetentionDays: 7, failedJobAttemptsPerWorkspace: 2, deletedRowRetentionDays: 30 },
      wakeJobs: () => {},
      logger: console,
    } as unknown as ServiceDeps;
    try {
      await runMaintenance(deps);
    } finally {
      await deps.pool.end();
    }
    const daily = await sql<{ database_id: string }>(
      service.controlUrl,
      "SELECT database_id FROM backups WHERE trigger = 'daily' AND database_id = ANY($1) AND status <> 'failed'",
      [[spentDb, freshDb, failedDailyDb]],
    );
    expect(daily.map((d) => d.database_id)).toEqual([freshDb]);
  });

  it("reads at most 1,024 characters of the comment a tenant writes on its database", async () => {
    const api = client(service, await service.createToken("commenter"));
    const { id, url } = await readyDatabase(api, "commenter");
    await sql(
      url,
      `DO $$ BEGIN EXECUTE format('COMMENT ON DATABASE %I IS %L', current_database(), repeat('x', 100000)); END $$`,
    );
    const [{ pg_name }] = (await sql<{ pg_name: string }>(
      service.controlUrl,
      "SELECT pg_name FROM databases WHERE id = $1",
      [id],
    )) as [{ pg_name: string }];
    const pool = createPool(service.postgresUrl, 1);
    try {
      expect(await databaseComment(pool, pg_name)).toBe("x".repeat(1024));
    } finally {
      await pool.end();
    }
  });
});

describe("a restore and a clone of an archive past archiveEntryLimit", () => {
  let dir: string;
  let service: TestService | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-archive-limit-"));
  });
  afterAll(async () => {
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("fail once, naming the limit, and leave the database's data as it was", async () => {
    // Taken while the service allowed more (the limit was lowered since).
    service = await startTestService({ dir, service: { archiveEntryLimit: 1000 } });
    const token = await service.createToken("lowered");
    let api = client(service, token);
    const created = (await api("POST", "/v1/projects", { name: "lowered" })).body.data;
    const id = created.database.id as string;
    const url = created.database.connections[0].endpoints.direct.connectionString as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"));
    await sql(
      url,
      `DO $$ BEGIN FOR i IN 1..${limit + 10} LOOP
         EXECUTE format('CREATE FUNCTION h%s() RETURNS integer LANGUAGE sql AS ''SELECT 1''', i);
       END LOOP; END $$`,
    );
    const backupId = (await api("POST", `/v1/databases/${id}/backups`)).body.data.id as string;
    await eventually(async () => {
      const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
      expect(list.find((b) => b.id === backupId)?.status).toBe("completed");
    });
    await service.stop();
    // Restores always in parallel runs (the path that lists the archive's sections).
    service = await startTestService({
      dir,
      service: { archiveEntryLimit: limit, restoreSplitMinBytes: 0, restoreJobs: 2 },
    });
    api = client(service, token);
    const reason = `the backup archive lists more than ${limit} objects, the most this service dumps or restores (archiveEntryLimit)`;

    // A clone (of the database as it is now), then a restore of the backup.
    const clone = await api("POST", `/v1/projects/${created.id}/databases`, {
      source: { type: "database", databaseId: id },
    });
    expect(clone.status).toBe(201);
    const cloneId = clone.body.data.id as string;
    await eventually(async () =>
      expect((await api("GET", `/v1/databases/${cloneId}`)).body.data.status).toBe("failure"),
    );
    const restoring = await api("POST", `/v1/databases/${id}/restore`, {
      source: { type: "backup", databaseId: id, backupId },
    });
    expect(restoring.status).toBe(200);
    await eventually(async () => {
      const db = (await api("GET", `/v1/databases/${id}`)).body.data;
      expect(db.status).toBe("failure");
    });
    // The server's port changed with the restart: read the data as the superuser.
    const [{ pg_name }] = (await sql<{ pg_name: string }>(
      service.controlUrl,
      "SELECT pg_name FROM databases WHERE id = $1",
      [id],
    )) as [{ pg_name: string }];
    const superuser = new URL(service.postgresUrl);
    superuser.pathname = `/${pg_name}`;
    const [{ n }] = (await sql<{ n: number }>(
      superuser.toString(),
      "SELECT count(*)::int AS n FROM pg_proc WHERE proname LIKE 'h%' AND pronamespace = 'public'::regnamespace",
    )) as [{ n: number }];
    expect(n).toBe(limit + 10);
    const jobs = await sql<{ kind: string; state: string; error: string; runs: string[] }>(
      service.controlUrl,
      `SELECT j.kind, j.state, j.error, (SELECT array_agg(r.outcome ORDER BY r.id) FROM job_runs r WHERE r.job_id = j.id) AS runs
         FROM jobs j WHERE j.target_id = ANY($1) AND j.kind IN ('restore', 'provision') AND j.state <> 'done' ORDER BY j.id`,
      [[id, cloneId]],
    );
    // Each failed for good on the limit: its last attempt, never retried after it (on a loaded machine a first attempt
    // may fail on something else, and be retried, before).
    const failedOnce = expect.arrayContaining(["failed"]);
    expect(jobs, JSON.stringify(jobs)).toEqual([
      { kind: "provision", state: "failed", error: reason, runs: failedOnce },
      { kind: "restore", state: "failed", error: reason, runs: failedOnce },
    ]);
    for (const job of jobs) {
      expect(job.runs.at(-1)).toBe("failed");
      expect(job.runs.slice(0, -1).every((o) => o === "retry" || o === "unavailable")).toBe(true);
      expect(job.runs.length).toBeLessThan(5);
    }
  });
});
