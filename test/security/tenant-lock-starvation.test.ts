import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// A tenant holding ACCESS EXCLUSIVE locks on its own tables must not stall anyone else's jobs: pg_dump would wait for
// those locks forever, and with a handful of job workers every other workspace's new databases stayed `provisioning`.

type Api = ReturnType<typeof client>;
const services: TestService[] = [];
const holders: pg.Client[] = [];

afterAll(async () => {
  for (const h of holders) await h.end().catch(() => {});
  for (const s of services) await s.stop();
});

async function settled(api: Api, id: string): Promise<Json> {
  return eventually(
    async () => {
      const d = (await api("GET", `/v1/databases/${id}`)).body.data;
      if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
      return d;
    },
    { timeoutMs: 40_000 },
  );
}

/** A tenant session that keeps an ACCESS EXCLUSIVE lock on its table until the test ends. */
async function holdLock(connectionString: string, table: string): Promise<void> {
  await sql(connectionString, `CREATE TABLE IF NOT EXISTS ${table} (v int)`);
  const c = new pg.Client({ connectionString });
  c.on("error", () => {});
  await c.connect();
  holders.push(c);
  await c.query(`BEGIN; LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
}

async function backupStatus(api: Api, dbId: string, backupId: string): Promise<string> {
  return (await api("GET", `/v1/databases/${dbId}/backups`)).body.data.find((b: Json) => b.id === backupId).status;
}

describe("with default settings", () => {
  it("one workspace's stuck backups never take every worker: another workspace's database still gets ready", async () => {
    const service = await startTestService();
    services.push(service);
    const a = client(service, service.token);
    const b = client(service, await service.createToken("other"));
    const project = (await a("POST", "/v1/projects", { name: "locker" })).body.data;
    const dbs: Json[] = [project.database];
    // As many databases as there are job workers (4 by default), each with a locked table and a backup request.
    for (let i = 1; i < 4; i++)
      dbs.push((await a("POST", `/v1/projects/${project.id}/databases`, { name: `locker-${i}` })).body.data);
    for (const db of dbs) expect((await settled(a, db.id)).status).toBe("ready");
    for (const db of dbs) await holdLock(db.connectionString, "hostage");
    for (const db of dbs) expect((await a("POST", `/v1/databases/${db.id}/backups`)).status).toBe(201);
    // The backups are running (stuck behind the locks) before the other workspace asks for anything.
    await eventually(async () => {
      const [row] = await sql<{ n: number }>(
        service.controlUrl,
        "SELECT count(DISTINCT job_id)::int AS n FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'backup'",
      );
      expect(row!.n).toBeGreaterThanOrEqual(2);
    });
    const other = (await b("POST", "/v1/projects", { name: "innocent" })).body.data;
    expect((await settled(b, other.database.id)).status).toBe("ready");
  }, 120_000);
});

describe("with short limits", () => {
  it("a backup behind a tenant's lock fails clearly after the lock wait bound; the database stays ready", async () => {
    const service = await startTestService({ service: { lockTimeoutMs: 300, jobMaxAttempts: 2 } });
    services.push(service);
    const api = client(service, service.token);
    const project = (await api("POST", "/v1/projects", { name: "locker" })).body.data;
    const db = await settled(api, project.database.id);
    await holdLock(project.database.connectionString, "hostage");
    const backup = (await api("POST", `/v1/databases/${db.id}/backups`)).body.data;
    await eventually(async () => expect(await backupStatus(api, db.id, backup.id)).toBe("failed"));
    const [job] = await sql<{ state: string; error: string }>(
      service.controlUrl,
      "SELECT state, error FROM jobs WHERE kind = 'backup' AND payload->>'backupId' = $1",
      [backup.id],
    );
    expect(job!.state).toBe("failed");
    expect(job!.error).toMatch(/LOCK TABLE/);
    expect((await api("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready");
    expect(await sql(service.postgresUrl, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'mds\\_job\\_%'")).toEqual(
      [],
    );
  });

  it("a restore past the job time limit is aborted: status failure, old data in place, outcome timed-out, nothing left behind", async () => {
    const service = await startTestService({ service: { jobTimeoutMs: 3000, jobMaxAttempts: 1 } });
    services.push(service);
    const api = client(service, service.token);
    const project = (await api("POST", "/v1/projects", { name: "slow" })).body.data;
    const db = await settled(api, project.database.id);
    const url = project.database.connectionString as string;
    // A CHECK constraint that takes far longer than the limit for every row pg_restore loads.
    await sql(
      url,
      "CREATE FUNCTION slow(v int) RETURNS boolean LANGUAGE sql AS $$SELECT current_setting('application_name') <> 'pg_restore' OR pg_sleep(3600) IS NOT NULL$$",
    );
    await sql(url, "CREATE TABLE items (v int CHECK (public.slow(v)))");
    await sql(url, "INSERT INTO items VALUES (1)");
    await api("POST", `/v1/databases/${db.id}/backups`);
    const backup = await eventually(async () => {
      const found = (await api("GET", `/v1/databases/${db.id}/backups`)).body.data[0];
      if (found.status !== "completed") throw new Error(found.status);
      return found;
    });
    const res = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(res.status).toBe(200);
    expect((await settled(api, db.id)).status).toBe("failure");
    expect(await sql(url, "SELECT v FROM items")).toEqual([{ v: 1 }]);
    const runs = await sql<{ outcome: string }>(
      service.controlUrl,
      "SELECT r.outcome FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore'",
    );
    expect(runs).toEqual([{ outcome: "timed-out" }]);
    const [job] = await sql<{ error: string }>(service.controlUrl, "SELECT error FROM jobs WHERE kind = 'restore'");
    expect(job!.error).toMatch(/time limit/);
    await eventually(async () => {
      expect(await sql(service.postgresUrl, "SELECT datname FROM pg_database WHERE datname ~ '_[ro][0-9]+$'")).toEqual(
        [],
      );
      expect(await sql(service.postgresUrl, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'mds\\_job\\_%'")).toEqual(
        [],
      );
      expect(
        await sql(
          service.postgresUrl,
          "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()",
        ),
      ).toEqual([]);
    });
  });
});
