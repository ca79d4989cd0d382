import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Backup, BackupList, Database, dataOf } from "../../src/contract/index.ts";
import { runMaintenance } from "../../src/service/jobs/scheduler.ts";
import type { ServiceDeps } from "../../src/service/runtime/deps.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, tryConnect, type Json } from "./helpers.ts";

let service: TestService;
let api: ReturnType<typeof client>;
let project: Json;

async function settled(id: string): Promise<Json> {
  return eventually(async () => {
    const d = (await api("GET", `/v1/databases/${id}`)).body.data;
    if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
    return d;
  });
}
async function completedBackup(dbId: string): Promise<Json> {
  const created = await api("POST", `/v1/databases/${dbId}/backups`);
  expect(created.status).toBe(201);
  const b = dataOf(Backup).parse(created.body).data;
  expect(b.status).toBe("running");
  return eventually(async () => {
    const list = BackupList.parse((await api("GET", `/v1/databases/${dbId}/backups`)).body);
    const found = list.data.find((x) => x.id === b.id)!;
    if (found.status !== "completed") throw new Error(found.status);
    return found;
  });
}
/** Every status the database shows from now until it settles. */
function watchStatuses(id: string): { stop(): Promise<string[]> } {
  const seen: string[] = [];
  let done = false;
  const loop = (async () => {
    while (!done) {
      const s = (await api("GET", `/v1/databases/${id}`)).body.data.status as string;
      if (seen.at(-1) !== s) seen.push(s);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    async stop() {
      done = true;
      await loop;
      return seen;
    },
  };
}

beforeAll(async () => {
  service = await startTestService();
  api = client(service, service.token);
  project = (await api("POST", "/v1/projects", { name: "restore" })).body.data;
  await settled(project.database.id);
});
afterAll(async () => {
  await service?.stop();
});

describe("backups and restore", () => {
  it("restore end to end: A is back, B is gone, the same credentials work, recovering then ready", async () => {
    const db = project.database;
    const url = db.connectionString as string;
    await sql(url, "CREATE TABLE items (name text)");
    await sql(url, "INSERT INTO items VALUES ('A')");
    const backup = await completedBackup(db.id);
    expect(backup.size).toBeGreaterThan(0);
    const list = BackupList.parse((await api("GET", `/v1/databases/${db.id}/backups`)).body);
    expect(list.meta.backupRetentionDays).toBe(7);
    expect(list.pagination).toEqual({ hasMore: false, limit: 100 });
    await sql(url, "INSERT INTO items VALUES ('B')");
    await sql(url, "CREATE TABLE later (v int)");

    const watch = watchStatuses(db.id);
    const res = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(res.status).toBe(200);
    const body = dataOf(Database).parse(res.body).data;
    expect(body.status).toBe("recovering");
    expect(body.source).toEqual({ type: "backup", databaseId: db.id, backupId: backup.id });
    expect(JSON.stringify(res.body)).not.toContain("connectionString");
    const final = await settled(db.id);
    const statuses = await watch.stop();
    expect(final.status).toBe("ready");
    expect(statuses.at(-1)).toBe("ready");
    expect(statuses).not.toContain("failure");
    expect(await sql(url, "SELECT name FROM items ORDER BY name")).toEqual([{ name: "A" }]);
    expect(await sql(url, "SELECT to_regclass('later') AS t")).toEqual([{ t: null }]);
    // Still writable through the same credentials, and objects still belong to the owner.
    await sql(url, "INSERT INTO items VALUES ('C')");
    // No scratch or old copy is left behind (the old copy is dropped just after `ready`).
    await eventually(async () =>
      expect(await sql(service.postgresUrl, "SELECT datname FROM pg_database WHERE datname ~ '_[ro][0-9]+$'")).toEqual(
        [],
      ),
    );
    const runs = await sql<{ outcome: string }>(
      service.controlUrl,
      "SELECT r.outcome FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore'",
    );
    expect(runs).toEqual([{ outcome: "restored" }]);
  });

  it("a restore job run again after its swap (a crash before it recorded the end) does not restore twice", async () => {
    const db = project.database;
    const backup = await completedBackup(db.id);
    expect(
      (
        await api("POST", `/v1/databases/${db.id}/restore`, {
          source: { type: "backup", databaseId: db.id, backupId: backup.id },
        })
      ).status,
    ).toBe(200);
    await settled(db.id);
    const [job] = await sql<{ id: string }>(
      service.controlUrl,
      "SELECT id FROM jobs WHERE kind = 'restore' AND target_id = $1 ORDER BY id DESC LIMIT 1",
      [db.id],
    );
    await sql(db.connectionString, "INSERT INTO items VALUES ('written-after-restore')");
    // What a crash between the swap and the job's final commit leaves: the job pending, the database recovering.
    // One statement: with two, a worker could resume the job between them and the second would undo its `ready`.
    await sql(
      service.controlUrl,
      "WITH job AS (UPDATE jobs SET state = 'pending', finished_at = NULL WHERE id = $1) UPDATE databases SET status = 'recovering' WHERE id = $2",
      [job!.id, db.id],
    );
    await eventually(async () =>
      expect(await sql(service.controlUrl, "SELECT state FROM jobs WHERE id = $1", [job!.id])).toEqual([
        { state: "done" },
      ]),
    );
    expect((await settled(db.id)).status).toBe("ready");
    const outcomes = await sql<{ outcome: string }>(
      service.controlUrl,
      "SELECT outcome FROM job_runs WHERE job_id = $1 ORDER BY id",
      [job!.id],
    );
    expect(outcomes.map((o) => o.outcome)).toEqual(["restored", "resumed-after-swap"]);
    expect(await sql(db.connectionString, "SELECT name FROM items WHERE name = 'written-after-restore'")).toEqual([
      { name: "written-after-restore" },
    ]);
  });

  it("restore while provisioning is 409; a foreign or unknown backup is 404/422; the data stays", async () => {
    const db = project.database;
    const backup = await completedBackup(db.id);
    const other = (await api("POST", `/v1/projects/${project.id}/databases`, { name: "other" })).body.data;
    await settled(other.id);
    // Hold the state still (a real provisioning can finish before the request lands): the rule is what is tested.
    for (const state of ["provisioning", "recovering"]) {
      await sql(service.controlUrl, "UPDATE databases SET status = $2 WHERE id = $1", [other.id, state]);
      const conflict = await api("POST", `/v1/databases/${other.id}/restore`, {
        source: { type: "backup", databaseId: db.id, backupId: backup.id },
      });
      expect(conflict.status).toBe(409);
      expect(conflict.body.error.code).toBe("conflict");
    }
    await sql(service.controlUrl, "UPDATE databases SET status = 'ready' WHERE id = $1", [other.id]);
    expect(
      await sql(service.controlUrl, "SELECT 1 FROM jobs WHERE kind = 'restore' AND target_id = $1", [other.id]),
    ).toEqual([]);
    // A backup that belongs to another database than source.databaseId.
    const wrong = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: other.id, backupId: backup.id },
    });
    expect([404, 422]).toContain(wrong.status);
    // A backup that is not completed is 422.
    await sql(service.controlUrl, "UPDATE backups SET status = 'running' WHERE id = $1", [backup.id]);
    const running = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(running.status).toBe(422);
    expect(running.body.error.code).toBe("unprocessable");
    await sql(service.controlUrl, "UPDATE backups SET status = 'completed' WHERE id = $1", [backup.id]);
    const unknown = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: "bkp_c000000000000000000000000" },
    });
    expect(unknown.status).toBe(404);
    expect((await api("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready");
    // While recovering, a second restore is 409.
    await sql(db.connectionString, "INSERT INTO items VALUES ('D')");
    const first = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(first.status).toBe(200);
    const second = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    if (second.status !== 200) expect(second.status).toBe(409);
    await settled(db.id);
  });

  it("a restore with an Idempotency-Key runs once however often it is posted", async () => {
    const db = project.database;
    const backup = await completedBackup(db.id);
    const headers = { "idempotency-key": "restore-once" };
    const body = { source: { type: "backup", databaseId: db.id, backupId: backup.id } };
    const first = await api("POST", `/v1/databases/${db.id}/restore`, body, headers);
    expect(first.status).toBe(200);
    await settled(db.id);
    const again = await api("POST", `/v1/databases/${db.id}/restore`, body, headers);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const jobs = await sql(
      service.controlUrl,
      "SELECT id FROM jobs WHERE kind = 'restore' AND idempotency_key = 'restore-once'",
    );
    expect(jobs).toHaveLength(1);
  });

  it("a failed restore keeps the old data and ends in failure; a later restore recovers", async () => {
    const db = project.database;
    const backup = await completedBackup(db.id);
    const before = await sql(db.connectionString, "SELECT name FROM items ORDER BY name");
    // Corrupt the archive: the checksum check refuses it before anything is touched.
    const [row] = await sql<{ path: string }>(service.controlUrl, "SELECT path FROM backups WHERE id = $1", [
      backup.id,
    ]);
    const { appendFile } = await import("node:fs/promises");
    await appendFile(row!.path, "garbage");
    const res = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(res.status).toBe(200);
    const final = await settled(db.id);
    expect(final.status).toBe("failure");
    expect(await sql(db.connectionString, "SELECT name FROM items ORDER BY name")).toEqual(before);
    // No scratch or old copy is left behind (the old copy is dropped just after `ready`).
    await eventually(async () =>
      expect(await sql(service.postgresUrl, "SELECT datname FROM pg_database WHERE datname ~ '_[ro][0-9]+$'")).toEqual(
        [],
      ),
    );
    // A restore from a good backup takes a failed database back to ready.
    const good = await completedBackup(db.id);
    expect(
      (
        await api("POST", `/v1/databases/${db.id}/restore`, {
          source: { type: "backup", databaseId: db.id, backupId: good.id },
        })
      ).status,
    ).toBe(200);
    expect((await settled(db.id)).status).toBe("ready");
  });

  it("a database created from a backup starts with its data", async () => {
    const db = project.database;
    const backup = await completedBackup(db.id);
    const res = await api("POST", `/v1/projects/${project.id}/databases`, {
      name: "copy",
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.source).toEqual({ type: "backup", databaseId: db.id, backupId: backup.id });
    expect((await settled(res.body.data.id)).status).toBe("ready");
    const rows = await sql(res.body.data.connectionString, "SELECT count(*)::int AS n FROM items");
    expect(rows[0]!.n).toBeGreaterThan(0);
    await sql(res.body.data.connectionString, "INSERT INTO items VALUES ('copy-only')");
    expect(await sql(db.connectionString, "SELECT name FROM items WHERE name = 'copy-only'")).toEqual([]);
    expect(await tryConnect(res.body.data.connectionString)).toBe(true);
  });

  it("daily backups and retention", async () => {
    const db = project.database;
    // Age every backup of the database past 24 h and past retention.
    await sql(service.controlUrl, "UPDATE backups SET created_at = now() - interval '8 days' WHERE database_id = $1", [
      db.id,
    ]);
    const paths = (
      await sql<{ path: string }>(
        service.controlUrl,
        "SELECT path FROM backups WHERE database_id = $1 AND path IS NOT NULL",
        [db.id],
      )
    ).map((r) => r.path);
    expect(paths.length).toBeGreaterThan(0);
    const deps = {
      pool: (await import("../../src/service/store/pool.ts")).createPool(service.controlUrl, 2),
      config: { backupRetentionDays: 7, failedJobAttemptsPerWorkspace: 50, deletedRowRetentionDays: 30 },
      wakeJobs: () => {},
      logger: console,
    } as unknown as ServiceDeps;
    const result = await runMaintenance(deps);
    await deps.pool.end();
    expect(result.expired).toBeGreaterThanOrEqual(paths.length);
    expect(result.scheduled).toBeGreaterThanOrEqual(1);
    for (const p of paths) expect(existsSync(p)).toBe(false);
    // The service's workers pick up the daily backup job.
    await eventually(async () => {
      const list = BackupList.parse((await api("GET", `/v1/databases/${db.id}/backups`)).body);
      expect(list.data.map((b) => b.status)).toEqual(["completed"]);
    });
  });
});
