import { access } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, completedBackup, eventually, sql, type Json } from "./helpers.ts";

// DELETE /v1/databases/{databaseId}/backups/{backupId}: our service's extension (the public API has none), used by
// BackupSchedule's retention. Only a completed or failed manual backup of that database, in the caller's workspace;
// the archive and the row leave (the row is marked deleted) and the manual-backup quota is freed. A repeated DELETE
// is 404, as every other id this workspace cannot see: a retention pass treats 404 as "already gone".

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

describe("DELETE /v1/databases/{databaseId}/backups/{backupId}", () => {
  let service: TestService;
  let a: ReturnType<typeof client>;
  let b: ReturnType<typeof client>;
  let dbA: string;
  let dbA2: string;
  let dbB: string;

  beforeAll(async () => {
    service = await startTestService({ service: { backupsPerWorkspace: 2 } });
    a = client(service, await service.createToken("backup-delete-a"));
    b = client(service, await service.createToken("backup-delete-b"));
    const ready = async (api: typeof a, id: string) =>
      eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"), {
        timeoutMs: 60_000,
      });
    const projectA = (await a("POST", "/v1/projects", { name: "a" })).body.data;
    dbA = projectA.database.id;
    dbA2 = (await a("POST", "/v1/databases", { projectId: projectA.id, name: "second" })).body.data.id;
    dbB = (await b("POST", "/v1/projects", { name: "b" })).body.data.database.id;
    await Promise.all([ready(a, dbA), ready(a, dbA2), ready(b, dbB)]);
  });
  afterAll(async () => {
    await service?.stop();
  });

  const archiveOf = async (backupId: string) =>
    ((await sql<{ path: string | null }>(service.controlUrl, "SELECT path FROM backups WHERE id = $1", [backupId]))[0]
      ?.path ?? null) as string | null;
  const deletedAt = async (backupId: string) =>
    (
      await sql<{ deleted_at: Date | null }>(service.controlUrl, "SELECT deleted_at FROM backups WHERE id = $1", [
        backupId,
      ])
    )[0]?.deleted_at ?? null;

  it("a token of workspace B cannot delete, or learn of, a backup of workspace A", async () => {
    const backup = await completedBackup(a, dbA);
    // B names A's database and A's backup: answered exactly as an id that never existed.
    const attack = await b("DELETE", `/v1/databases/${dbA}/backups/${backup.id}`);
    expect(attack.status).toBe(404);
    expect(attack.body.error.message).toBe(`database "${dbA}" not found`);
    // B names its own database and A's backup.
    const viaOwn = await b("DELETE", `/v1/databases/${dbB}/backups/${backup.id}`);
    expect(viaOwn.status).toBe(404);
    expect(viaOwn.body.error.message).toBe(`backup "${backup.id}" not found`);
    const never = await b("DELETE", `/v1/databases/${dbB}/backups/bkp_cnever0000000000000000000`);
    expect(never.status).toBe(404);
    expect(never.body.error.hint).toBe(viaOwn.body.error.hint);
    expect(await deletedAt(backup.id)).toBeNull();
    const archive = await archiveOf(backup.id);
    expect(archive && (await exists(archive))).toBe(true);
    const listed = (await a("GET", `/v1/databases/${dbA}/backups`)).body.data as Json[];
    expect(listed.map((x) => x.id)).toContain(backup.id);
  });

  it("A's backup named under A's other database is 404: a backup is deleted only through its own database", async () => {
    const backup = await completedBackup(a, dbA);
    const wrong = await a("DELETE", `/v1/databases/${dbA2}/backups/${backup.id}`);
    expect(wrong.status).toBe(404);
    expect(await deletedAt(backup.id)).toBeNull();
    expect((await a("DELETE", `/v1/databases/${dbA}/backups/${backup.id}`)).status).toBe(204);
  });

  it("removes the archive and the row from the list, frees the quota, and a repeated DELETE is 404", async () => {
    // The quota is 2 manual backups: the first test's backup is one, this one the second.
    const first = await completedBackup(a, dbA);
    const refused = await a("POST", `/v1/databases/${dbA}/backups`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/manual backups, its limit is 2/);

    const archive = (await archiveOf(first.id))!;
    expect(await exists(archive)).toBe(true);
    const deleted = await a("DELETE", `/v1/databases/${dbA}/backups/${first.id}`);
    expect(deleted.status).toBe(204);
    expect(await exists(archive)).toBe(false);
    expect(path.basename(archive)).toBe(`${first.id}.dump`);
    expect(await deletedAt(first.id)).not.toBeNull();
    const listed = (await a("GET", `/v1/databases/${dbA}/backups`)).body.data as Json[];
    expect(listed.map((x) => x.id)).not.toContain(first.id);

    // The quota is freed: a new backup is taken.
    const again = await a("POST", `/v1/databases/${dbA}/backups`);
    expect(again.status).toBe(201);

    // Idempotent: the second DELETE finds nothing (404), changes nothing.
    const repeated = await a("DELETE", `/v1/databases/${dbA}/backups/${first.id}`);
    expect(repeated.status).toBe(404);
    expect(repeated.body.error.message).toBe(`backup "${first.id}" not found`);
    // A restore from a deleted backup is refused as an unknown backup.
    const restore = await a("POST", `/v1/databases/${dbA}/restore`, {
      source: { type: "backup", databaseId: dbA, backupId: first.id },
    });
    expect(restore.status).toBe(404);
    await eventually(async () => {
      const l = (await a("GET", `/v1/databases/${dbA}/backups`)).body.data as Json[];
      expect(l.find((x) => x.id === again.body.data.id)?.status).toBe("completed");
    });
    expect((await a("DELETE", `/v1/databases/${dbA}/backups/${again.body.data.id}`)).status).toBe(204);
  });

  it("refuses a running backup (409), a daily one (409), and malformed ids (400), each saying why", async () => {
    // A running backup: its row, as the POST leaves it before its job completes.
    const [{ id: running }] = (await sql<{ id: string }>(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger) VALUES ('bkp_crunning000000000000000001', $1, 'running', 'manual') RETURNING id",
      [dbA2],
    )) as [{ id: string }];
    const r = await a("DELETE", `/v1/databases/${dbA2}/backups/${running}`);
    expect(r.status).toBe(409);
    expect(r.body.error.message).toMatch(/is running/);
    expect(r.body.error.hint).toMatch(/wait until it completes or fails/);
    // Once it failed, it can be deleted (it holds no archive; it leaves the list and the quota).
    await sql(service.controlUrl, "UPDATE backups SET status = 'failed' WHERE id = $1", [running]);
    expect((await a("DELETE", `/v1/databases/${dbA2}/backups/${running}`)).status).toBe(204);

    const [{ id: daily }] = (await sql<{ id: string }>(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger, completed_at) VALUES ('bkp_cdaily00000000000000000001', $1, 'completed', 'daily', now()) RETURNING id",
      [dbA2],
    )) as [{ id: string }];
    const d = await a("DELETE", `/v1/databases/${dbA2}/backups/${daily}`);
    expect(d.status).toBe(409);
    expect(d.body.error.message).toMatch(/daily backup/);
    expect(d.body.error.hint).toMatch(/expire/);

    // A failed one can be deleted (it holds no archive; it leaves the list).
    const [{ id: failed }] = (await sql<{ id: string }>(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger, completed_at) VALUES ('bkp_cfailed0000000000000000001', $1, 'failed', 'manual', now()) RETURNING id",
      [dbA2],
    )) as [{ id: string }];
    expect((await a("DELETE", `/v1/databases/${dbA2}/backups/${failed}`)).status).toBe(204);

    const badBackup = await a("DELETE", `/v1/databases/${dbA2}/backups/not-an-id!`);
    expect(badBackup.status).toBe(400);
    expect(badBackup.body.error.message).toMatch(/invalid backup id/);
    const badDb = await a("DELETE", `/v1/databases/nope!/backups/${failed}`);
    expect(badDb.status).toBe(400);
    expect(badDb.body.error.message).toMatch(/invalid database id/);
  });

  it("refuses a backup a pending restore will read (409): the restore would fail without its archive", async () => {
    const [backup] = (await sql<{ id: string }>(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger, completed_at) VALUES ($2, $1, 'completed', 'manual', now()) RETURNING id",
      [dbA2, `bkp_codd${Date.now()}${Math.random().toString(36).slice(2)}`],
    )) as [{ id: string }];
    // A restore job queued but not yet run (run_after in the future keeps workers off it).
    await sql(
      service.controlUrl,
      "INSERT INTO jobs (kind, target_id, payload, run_after) VALUES ('restore', $1, $2, now() + interval '1 hour')",
      [dbA2, JSON.stringify({ backupId: backup.id, sourceDatabaseId: dbA2 })],
    );
    const r = await a("DELETE", `/v1/databases/${dbA2}/backups/${backup.id}`);
    expect(r.status).toBe(409);
    expect(r.body.error.message).toMatch(/restore/);
    await sql(
      service.controlUrl,
      "UPDATE jobs SET state = 'done', finished_at = now() WHERE kind = 'restore' AND target_id = $1",
      [dbA2],
    );
    expect((await a("DELETE", `/v1/databases/${dbA2}/backups/${backup.id}`)).status).toBe(204);
  });

  // The id patterns accept any non-space character after a leading c: a NUL byte (PostgreSQL refuses it in text), a
  // quote, a backslash, a percent sign, a very long id. Each is a 4xx, never a 500, and deletes nothing.
  it("ids with a NUL byte, quotes, backslashes or 10,000 characters are 4xx, and nothing is deleted", async () => {
    const [backup] = (await sql<{ id: string }>(
      service.controlUrl,
      "INSERT INTO backups (id, database_id, status, trigger, completed_at) VALUES ($2, $1, 'completed', 'manual', now()) RETURNING id",
      [dbA2, `bkp_codd${Date.now()}${Math.random().toString(36).slice(2)}`],
    )) as [{ id: string }];
    const odd = ["c%00%00%00%00%00%00%00%00", "c'%22%5C%25;--x", `c${"a".repeat(10_000)}`, "bkp_c%00aaaaaaaa"];
    for (const id of odd) {
      for (const [method, url] of [
        ["DELETE", `/v1/databases/${dbA2}/backups/${id}`],
        ["DELETE", `/v1/databases/${id}/backups/${backup.id}`],
        ["GET", `/v1/databases/${id}/backups`],
      ] as const) {
        const r = await a(method, url);
        expect(r.status, `${method} ${url.slice(0, 80)}`).toBeGreaterThanOrEqual(400);
        expect(r.status, `${method} ${url.slice(0, 80)}: ${JSON.stringify(r.body)}`).toBeLessThan(500);
      }
    }
    expect(await deletedAt(backup.id)).toBeNull();
    // The same NUL byte in a JSON body's name reaches PostgreSQL as text: 400 too.
    const named = await a("POST", "/v1/projects", { name: "x\u0000y" });
    expect(named.status, JSON.stringify(named.body)).toBeGreaterThanOrEqual(400);
    expect(named.status).toBeLessThan(500);
  });
});
