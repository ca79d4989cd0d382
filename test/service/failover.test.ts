import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { regionIds } from "../../src/contract/index.ts";
import { startPostgres, templateCluster, type RunningPostgres } from "../../src/postgres/index.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";
import { startService, type RunningService } from "../../src/service/index.ts";
import { migrate } from "../../src/service/store/migrate.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { startReplicatedPostgres, type ReplicatedPostgres } from "../support/replicated-postgres.ts";
import { client, completedBackup, eventually, settledDatabase, sql, tryConnect, withDatabase } from "./helpers.ts";
import { newLedger, sendUntilDone, tenantWriter } from "./faults/traffic.ts";

// docs/servers.md "What a failover means for the service", shown: a PostgreSQL primary with a synchronous standby
// behind one endpoint, API traffic running (creates, rotations, a backup, a restore) and a tenant writing, then the
// primary SIGKILLed and the standby promoted. Once for the region server, once for the control store.
// Measured figures (requests that answered 503, time to recover) are printed; docs/servers.md records them.

type Stack = {
  dir: string;
  replicated: ReplicatedPostgres;
  plain: RunningPostgres;
  service: RunningService;
  controlUrl: string;
  /** Superuser URL of the region server (through its endpoint when it is the replicated one). */
  regionUrl: string;
  token: string;
};

let stack: Stack | undefined;
afterEach(async () => {
  if (!stack) return;
  await stack.service.stop().catch(() => {});
  await stack.replicated.stop();
  await stack.plain.stop();
  await rm(stack.dir, { recursive: true, force: true });
  stack = undefined;
});

async function startStack(failingOver: "region" | "control"): Promise<Stack> {
  const dir = await mkdtemp(path.join(tmpdir(), "mds-failover-"));
  const replicated = await startReplicatedPostgres({ dir: path.join(dir, "replicated") });
  const plain = await startPostgres({
    dir: path.join(dir, "plain"),
    template: await templateCluster(),
    settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
  });
  const controlServer = failingOver === "control" ? replicated.url : plain.url;
  const regionUrl = failingOver === "region" ? replicated.url : plain.url;
  await sql(controlServer, "CREATE DATABASE mds_control");
  const controlUrl = withDatabase(controlServer, "mds_control");
  const pool = createPool(controlUrl, 1);
  await migrate(pool);
  const token = (await createServiceToken(pool, { workspace: "default" })).token;
  await pool.end();
  const service = await startService({
    controlUrl,
    regions: Object.fromEntries(regionIds.map((r) => [r, { adminUrl: regionUrl }])),
    encryptionKey: randomBytes(32),
    backupDir: path.join(dir, "backups"),
    jobPollIntervalMs: 100,
    spareDatabases: 2,
    rateLimit: { perSecond: 1000, burst: 1000 },
    logger: pino({ level: process.env.MDS_TEST_LOG ?? "silent" }),
  });
  stack = { dir, replicated, plain, service, controlUrl, regionUrl, token };
  return stack;
}

describe.each(["region", "control"] as const)("failover of the %s server's primary", (failingOver) => {
  it("loses no acknowledged write; every failed request is a 503 that succeeds when sent again", async () => {
    const { replicated, service, controlUrl, regionUrl, token } = await startStack(failingOver);
    const api = client(service, token);
    const ledger = newLedger();
    const send = (method: string, p: string, body: unknown, key?: string) =>
      sendUntilDone({ urls: () => [service.url], token, ledger }, method, p, body, key);

    // Before: a project, a database to restore (with a backup of it), one to rotate, one a tenant writes to.
    const project = (await send("POST", "/v1/projects", { name: "failover", createDatabase: false }, "p")).body.data;
    const database = async (name: string) => {
      const created = (await send("POST", `/v1/projects/${project.id}/databases`, { name }, `db-${name}`)).body.data;
      expect((await settledDatabase(api, created.id)).status).toBe("ready");
      return created;
    };
    const restored = await database("restored");
    const rotated = await database("rotated");
    const written = await database("written");
    await sql(
      restored.connectionString,
      "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 200000) g; CREATE TABLE marker (v text); INSERT INTO marker VALUES ('backup')",
    );
    const source = await completedBackup(api, restored.id);
    await sql(restored.connectionString, "UPDATE marker SET v = 'after'");
    await sql(written.connectionString, "CREATE TABLE acked (v int PRIMARY KEY)");
    const writer = tenantWriter(written.connectionString, "acked");

    // During: creates and rotations in a row, a backup and a restore, and the failover once traffic is flowing.
    const creates: { key: string; id: string; connectionString: string }[] = [];
    const rotations: string[] = [];
    let failedOverAt = 0;
    // Each loop goes on until the endpoint is back and it has done a few more requests through the new primary.
    let requestsAtRecovery: number | undefined = undefined;
    const trafficDone = (i: number) => requestsAtRecovery !== undefined && i >= requestsAtRecovery + 4 && i >= 6;
    let downMs = 0;
    const createLoop = (async () => {
      for (let i = 0; !trafficDone(i); i++) {
        const res = await send("POST", `/v1/projects/${project.id}/databases`, { name: `c${i}` }, `create-${i}`);
        if (res.status === 201)
          creates.push({ key: `create-${i}`, id: res.body.data.id, connectionString: res.body.data.connectionString });
      }
    })();
    const rotateLoop = (async () => {
      for (let i = 0; !trafficDone(i); i++) {
        const res = await send("POST", `/v1/connections/${rotated.defaultConnectionId}/rotate`, {}, `rotate-${i}`);
        if (res.status < 300) rotations.push(res.body.data.connectionString);
      }
    })();
    await eventually(() => creates.length >= 3 && rotations.length >= 3, { intervalMs: 10 });
    const backupRes = await send("POST", `/v1/databases/${restored.id}/backups`, undefined, "backup-1");
    const restoreRes = await send(
      "POST",
      `/v1/databases/${restored.id}/restore`,
      { source: { type: "backup", databaseId: restored.id, backupId: source.id } },
      "restore-1",
    );
    // The failover lands while the restore runs (or, on a fast day, just after it ended).
    await eventually(
      async () =>
        expect(
          await sql(controlUrl, "SELECT r.id FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore'"),
        ).not.toEqual([]),
      { intervalMs: 10 },
    );
    failedOverAt = Date.now();
    downMs = (await replicated.failover()).downMs;
    requestsAtRecovery = Math.max(creates.length, rotations.length);
    await Promise.all([createLoop, rotateLoop]);
    // The writer goes on until it has written through the new primary too.
    const ackedAtFailover = writer.acknowledged.length;
    await eventually(() => writer.acknowledged.length > ackedAtFailover + 5, { intervalMs: 20 });
    await writer.stop();

    // After: no violation, every acknowledged write is there, the control store and the server agree.
    expect(ledger.violations).toEqual([]);
    for (const c of creates) {
      expect((await settledDatabase(api, c.id)).status).toBe("ready");
      expect(await tryConnect(c.connectionString)).toBe(true);
    }
    // The last acknowledged password is the one the server knows.
    expect(await tryConnect(rotations.at(-1)!)).toBe(true);
    expect(await tryConnect(rotations.at(-2)!)).not.toBe(true);
    const backup = await eventually(async () => {
      const found = (await api("GET", `/v1/databases/${restored.id}/backups`)).body.data.find(
        (b: { id: string }) => b.id === backupRes.body.data.id,
      );
      expect(found?.status).toBe("completed");
      return found;
    });
    expect(backup.status).toBe("completed");
    expect(restoreRes.status).toBe(200);
    expect((await settledDatabase(api, restored.id)).status).toBe("ready");
    expect(await sql(restored.connectionString, "SELECT v FROM marker")).toEqual([{ v: "backup" }]);
    expect(await sql(restored.connectionString, "SELECT count(*)::int AS n FROM big")).toEqual([{ n: 200000 }]);
    // Jobs retried to completion; the restore swapped data in once.
    await eventually(async () =>
      expect(await sql(controlUrl, "SELECT kind, state FROM jobs WHERE state <> 'done'")).toEqual([]),
    );
    const restoredRuns = await sql(
      controlUrl,
      "SELECT r.outcome FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore' AND r.outcome = 'restored'",
    );
    expect(restoredRuns).toHaveLength(1);
    // Every live database of the control store is on the server, with its owner role.
    const rows = await sql<{ pg_name: string; owner_role: string }>(
      controlUrl,
      "SELECT pg_name, owner_role FROM databases WHERE deleted_at IS NULL",
    );
    const onServer = new Set(
      (await sql<{ datname: string }>(regionUrl, "SELECT datname FROM pg_database")).map((r) => r.datname),
    );
    const roles = new Set(
      (await sql<{ rolname: string }>(regionUrl, "SELECT rolname FROM pg_roles")).map((r) => r.rolname),
    );
    for (const r of rows) {
      expect(onServer.has(r.pg_name), r.pg_name).toBe(true);
      expect(roles.has(r.owner_role), r.owner_role).toBe(true);
    }
    // The tenant: every acknowledged INSERT is there (synchronous replication), and it reconnected.
    const present = new Set(
      (await sql<{ v: number }>(written.connectionString, "SELECT v FROM acked")).map((r) => r.v),
    );
    const lost = writer.acknowledged.filter((v) => !present.has(v));
    expect(lost).toEqual([]);
    if (failingOver === "region") expect(writer.reconnects).toBeGreaterThan(0);

    const runs = await sql<{ kind: string; outcome: string; n: number }>(
      controlUrl,
      "SELECT j.kind, r.outcome, count(*)::int AS n FROM job_runs r JOIN jobs j ON j.id = r.job_id GROUP BY 1, 2 ORDER BY 1, 2",
    );
    console.log(`job runs: ${runs.map((r) => `${r.kind} ${r.outcome} ×${r.n}`).join(", ")}`);
    console.log(
      `failover of the ${failingOver} server: endpoint down ${downMs} ms; ${ledger.retryable} requests answered 503, ` +
        `last at +${Math.max(0, ledger.lastFailureAt - failedOverAt)} ms; tenant reconnects ${writer.reconnects}; ` +
        `writes lost: ${lost.length} of ${writer.acknowledged.length} tenant rows, 0 of ${creates.length} creates, ${rotations.length} rotations`,
    );
  });
});
