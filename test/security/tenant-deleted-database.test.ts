import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, tryConnect, type Json } from "../service/helpers.ts";

// A deleted database.s logins: deleting a database marked its connections revoked but left their roles
// LOGIN until the drop job ran, and the tenant guard counts no session of a revoked login or a deleted database. A
// tenant could mint logins up to its quota, open sessions, delete the database (freeing the quota) and repeat while
// the drop jobs wait behind its own long jobs: sessions without end, counted toward no limit.

const open: pg.Client[] = [];
afterAll(async () => {
  for (const c of open) await c.end().catch(() => {});
});

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  open.push(c);
  return c;
}

describe("a deleted database's sessions", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({
      regionSettings: { loginConnectionLimit: 2, databaseConnectionLimit: 10, workspaceConnectionLimit: 20 },
      service: { connectionsPerWorkspace: 3 },
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("end, and its logins stop logging in, when DELETE returns, even while its drop job waits behind a long backup", async () => {
    const token = await service.createToken("deleter");
    const api = client(service, token);
    const created = (await api("POST", "/v1/projects", { name: "deleter" })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"));
    const urls = [created.database.connections[0].endpoints.direct.connectionString as string];
    for (let i = 0; i < 2; i++)
      urls.push(
        (await api("POST", `/v1/databases/${id}/connections`, { name: `more${i}` })).body.data.endpoints.direct
          .connectionString,
      );
    // The quota is full: three logins.
    expect((await api("POST", `/v1/databases/${id}/connections`, { name: "fourth" })).status).toBe(409);

    // A table the tenant keeps locked in a busy transaction: the backup's pg_dump waits for it (up to lockTimeoutMs),
    // and the drop job, queued after the backup, waits with it.
    const holder = await connect(urls[0]!);
    await holder.query("CREATE TABLE held (x int)");
    await holder.query("BEGIN");
    await holder.query("LOCK TABLE held IN ACCESS EXCLUSIVE MODE");
    void holder.query("SELECT pg_sleep(60)").catch(() => {});
    expect((await api("POST", `/v1/databases/${id}/backups`)).status).toBe(201);
    await eventually(
      async () =>
        expect(
          await sql(
            service.postgresUrl,
            "SELECT 1 FROM pg_stat_activity WHERE usename LIKE 'mds_job_%' AND wait_event_type = 'Lock'",
          ),
        ).toHaveLength(1),
      { timeoutMs: 10_000 },
    );

    // Two sessions per login (its limit), the holder being the first login's first.
    for (const url of [urls[0]!, urls[1]!, urls[1]!, urls[2]!, urls[2]!]) await connect(url);
    const logins = urls.map((u) => decodeURIComponent(new URL(u).username));
    const sessionsOf = async () =>
      (
        await sql<{ n: number }>(
          service.postgresUrl,
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = ANY($1)",
          [logins],
        )
      )[0]!.n;
    expect(await sessionsOf()).toBe(6);

    expect((await api("DELETE", `/v1/databases/${id}`)).status).toBe(204);
    // Gone when DELETE answered, not when the drop job gets to it.
    expect(await sessionsOf()).toBe(0);
    for (const url of urls) expect(await tryConnect(url)).not.toBe(true);
    // The freed quota is harmless now: a new database's logins count again.
    const again = (await api("POST", "/v1/projects", { name: "again" })).body.data as Json;
    expect(again.database.id).toBeTruthy();
  });
});
