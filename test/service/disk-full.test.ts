import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, statfs } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startPostgres, templateCluster, type RunningPostgres } from "../../src/postgres/index.ts";
import { failedAttemptsSql } from "../../src/service/domain/job-budget.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";
import { migrate } from "../../src/service/store/migrate.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, completedBackup, eventually, settledDatabase, sql, withDatabase, type Json } from "./helpers.ts";

// What the service does when what it writes to runs out of room.
//
// The backup volume: a real filesystem of a fixed size, full for real (ENOSPC from the kernel, statfs telling the
// truth), rather than a stream that pretends: the service runs in its own process inside a user and mount namespace
// (`unshare --user --map-root-user --mount`, no privilege needed) whose backup directory is a 64 MiB tmpfs. Only that
// process sees the mount, and it vanishes with the process, so nothing is left mounted whatever happens to the test.
// No loop device, no root, no fake of the filesystem: the archive writer, its cleanup and the free-space check all
// meet the kernel's answers.
//
// The control database: a PostgreSQL that turns read-only (a managed server whose storage filled up sets
// default_transaction_read_only, as Azure's and RDS's do; a standby not yet promoted refuses writes the same way).

const node = path.resolve("node_modules/.bin/node");
const fixture = path.resolve("test/service/fixtures/service-process.ts");
const volumeBytes = 64 * 1024 * 1024;

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** The service in a namespace of its own whose `backupDir` is a tmpfs of `volumeBytes`. */
async function serviceOnSmallVolume(input: {
  controlUrl: string;
  adminUrl: string;
  backupDir: string;
}): Promise<{ url: string; proc: ChildProcess }> {
  await mkdir(input.backupDir, { recursive: true, mode: 0o700 });
  const config = { ...input, key: randomBytes(32).toString("hex"), port: 0 };
  const mountThenRun = 'mount -t tmpfs -o size="$1",mode=0700 mds-backups "$2" && shift 2 && exec "$@"';
  const proc = spawn(
    "unshare",
    [
      "--user",
      "--map-root-user",
      "--mount",
      "sh",
      "-c",
      mountThenRun,
      "sh",
      String(volumeBytes),
      input.backupDir,
      node,
      fixture,
      JSON.stringify(config),
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  cleanups.push(async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await exited;
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    proc.once("exit", (code) => reject(new Error(`service exited with ${code}`)));
  });
  return { url, proc };
}

describe("the backup volume runs out of space", () => {
  it("fails the backup that ran out with its partial archive deleted, refuses new ones with a 409, and works again once space returns", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "mds-disk-full-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const postgres: RunningPostgres = await startPostgres({
      dir: path.join(dir, "pg"),
      template: await templateCluster(),
      settings: { fsync: "off", synchronous_commit: "off" },
    });
    cleanups.push(() => postgres.stop());
    await sql(postgres.url, "CREATE DATABASE mds_control");
    const controlUrl = withDatabase(postgres.url, "mds_control");
    const pool = createPool(controlUrl, 1);
    await migrate(pool);
    const { token, workspaceId } = await createServiceToken(pool, { workspace: "default" });
    await pool.end();
    const backupDir = path.join(dir, "backups");
    const { url, proc } = await serviceOnSmallVolume({ controlUrl, adminUrl: postgres.url, backupDir });
    const api = client({ url }, token);
    // The volume as the service sees it: through its process's root.
    const volume = `/proc/${proc.pid}/root${backupDir}`;
    const freeBytes = async () => {
      const s = await statfs(volume);
      return s.bavail * s.bsize;
    };
    const files = async (): Promise<string[]> =>
      (await readdir(volume, { recursive: true, withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort();
    expect(await freeBytes()).toBe(volumeBytes);

    // Two databases of 40 MiB that does not compress: each backup fits the volume alone, both together do not.
    const project = (await api("POST", "/v1/projects", { name: "disk", createDatabase: false })).body.data;
    const database = async (name: string) => {
      const created = (await api("POST", `/v1/projects/${project.id}/databases`, { name })).body.data;
      expect((await settledDatabase(api, created.id)).status).toBe("ready");
      await sql(created.connectionString, "CREATE TABLE blobs (id int PRIMARY KEY, b bytea)");
      for (let i = 0; i < 40; i++)
        await sql(created.connectionString, "INSERT INTO blobs VALUES ($1, $2)", [i, randomBytes(1024 * 1024)]);
      return created;
    };
    const first = await database("first");
    const second = await database("second");

    // What the workspace's budget holds before the backups (a provisioning attempt retried under load counts there).
    const budgetBefore = await sql(controlUrl, `SELECT (${failedAttemptsSql("$1")}) AS n`, [workspaceId]);
    // Both asked for at once: each sees room for itself (its database's size) and is taken (201).
    const asked = await Promise.all(
      [first, second].map((db) =>
        api("POST", `/v1/databases/${db.id}/backups`, undefined, { "idempotency-key": db.id }),
      ),
    );
    expect(asked.map((r) => r.status)).toEqual([201, 201]);
    const ids = asked.map((r) => r.body.data.id as string);
    const backupOf = async (dbId: string, id: string) =>
      ((await api("GET", `/v1/databases/${dbId}/backups`)).body.data as Json[]).find((b) => b.id === id);
    // While they run, no backup is ever listed completed unless its archive is whole (checked below, by restoring).
    const outcomes = await eventually(
      async () => {
        const statuses = [await backupOf(first.id, ids[0]!), await backupOf(second.id, ids[1]!)].map(
          (b) => b.status as string,
        );
        expect(statuses).not.toContain("running");
        return statuses;
      },
      { timeoutMs: 120_000 },
    );
    // At least one ran out of room; its job says so, and its partial archive is gone: the volume holds exactly the
    // completed archives.
    expect(outcomes).toContain("failed");
    // A backup is marked failed just before its job's own record commits: wait for that too.
    await eventually(async () =>
      expect(await sql(controlUrl, "SELECT id FROM jobs WHERE kind = 'backup' AND state = 'pending'")).toEqual([]),
    );
    const failedRuns = await sql<{ outcome: string; error: string }>(
      controlUrl,
      `SELECT (SELECT r.outcome FROM job_runs r WHERE r.job_id = j.id ORDER BY r.id DESC LIMIT 1) AS outcome, j.error
       FROM jobs j WHERE j.kind = 'backup' AND j.state = 'failed'`,
    );
    expect(failedRuns.length).toBe(outcomes.filter((s) => s === "failed").length);
    for (const run of failedRuns) {
      expect(run.outcome).toBe("volume-full");
      expect(run.error).toMatch(
        /^the backup volume is full \(no space left on device\): the partial archive was deleted/,
      );
    }
    // Not the workspace's fault: the backups that ran out left its failed-attempts budget as it was.
    expect(await sql(controlUrl, `SELECT (${failedAttemptsSql("$1")}) AS n`, [workspaceId])).toEqual(budgetBefore);
    const completed = ids.filter((_, i) => outcomes[i] === "completed");
    expect(await files()).toEqual(completed.map((id) => `${id}.dump`).sort());
    const failedAt = await freeBytes();
    console.log(
      `backup volume of ${volumeBytes} bytes: ${outcomes.filter((s) => s === "failed").length} of 2 concurrent backups ran out of space and failed, ${failedAt} bytes free after, no partial archive left`,
    );

    // The volume now holds one backup (on a day both ran out at once, one is taken now): the next one is refused
    // at the request, naming what is free and what it needs.
    let kept: { db: Json; id: string };
    if (completed.length > 0) kept = { db: outcomes[0] === "completed" ? first : second, id: completed[0]! };
    else kept = { db: first, id: (await completedBackup(api, first.id)).id };
    const refused = await api("POST", `/v1/databases/${second.id}/backups`, undefined, { "idempotency-key": "full" });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("conflict");
    expect(refused.body.error.message).toMatch(
      /^cannot take a backup: the backup volume has \d+ bytes free and this backup needs up to \d+ \(its database's size\)$/,
    );
    expect(refused.body.error.hint).toMatch(/free or grow the backup volume/);
    expect((await api("GET", `/v1/databases/${second.id}/backups`)).body.data).toHaveLength(1);

    // Nothing else is affected: a database is created, and the kept backup restores whole while the volume is full.
    const other = (await api("POST", `/v1/projects/${project.id}/databases`, { name: "other" })).body.data;
    expect((await settledDatabase(api, other.id)).status).toBe("ready");
    await sql(kept.db.connectionString, "DELETE FROM blobs WHERE id >= 20");
    const restore = await api(
      "POST",
      `/v1/databases/${kept.db.id}/restore`,
      { source: { type: "backup", databaseId: kept.db.id, backupId: kept.id } },
      { "idempotency-key": "restore" },
    );
    expect(restore.status).toBe(200);
    await eventually(
      async () =>
        expect(await sql(kept.db.connectionString, "SELECT count(*)::int AS n FROM blobs")).toEqual([{ n: 40 }]),
      { timeoutMs: 120_000 },
    );
    expect((await settledDatabase(api, kept.db.id)).status).toBe("ready");

    // Space returns (the kept backup is deleted once the restore's job has ended: until then it reads it, and a
    // DELETE is a 409): the same request now succeeds, and its archive is whole.
    await eventually(async () =>
      expect(await sql(controlUrl, "SELECT id FROM jobs WHERE kind = 'restore' AND state = 'pending'")).toEqual([]),
    );
    expect((await api("DELETE", `/v1/databases/${kept.db.id}/backups/${kept.id}`)).status).toBe(204);
    await eventually(async () => expect(await freeBytes()).toBeGreaterThan(volumeBytes - 1024 * 1024));
    const again = await completedBackup(api, second.id);
    expect(await files()).toEqual([`${again.id}.dump`]);
    const copy = (
      await api("POST", `/v1/projects/${project.id}/databases`, {
        name: "copy",
        source: { type: "backup", databaseId: second.id, backupId: again.id },
      })
    ).body.data;
    expect((await settledDatabase(api, copy.id)).status).toBe("ready");
    expect(
      await sql(copy.connectionString, "SELECT count(*)::int AS n, sum(length(b))::bigint AS bytes FROM blobs"),
    ).toEqual([{ n: 40, bytes: String(40 * 1024 * 1024) }]);
  });
});

describe("the control database refuses writes", () => {
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
  });

  it("answers writes 503 with Retry-After and a precise message, reads 200, and the same request succeeds once writes return", async () => {
    service = await startTestService();
    const api = client(service, service.token);
    const control = new URL(service.controlUrl).pathname.slice(1);
    // New sessions of the control database start read-only; the service's open ones are ended (it reconnects).
    const setReadOnly = async (on: boolean) => {
      await sql(
        service!.postgresUrl,
        on
          ? `ALTER DATABASE ${control} SET default_transaction_read_only = on`
          : `ALTER DATABASE ${control} RESET default_transaction_read_only`,
      );
      await sql(
        service!.postgresUrl,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        [control],
      );
    };
    const before = (await api("GET", "/v1/projects")).body.data.length;
    await setReadOnly(true);
    try {
      const refused = await eventually(async () => {
        const res = await api("POST", "/v1/projects", { name: "ro" }, { "idempotency-key": "ro" });
        expect(res.status).toBe(503);
        expect(res.body.error.message).toMatch(/refuses writes/);
        return res;
      });
      expect(refused.body.error).toEqual({
        code: "unavailable",
        message: "a database server of the service refuses writes for now (read-only, or out of disk space)",
        hint: "retry later with the same Idempotency-Key",
      });
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      // Reads still answer.
      expect((await api("GET", "/v1/projects")).status).toBe(200);
    } finally {
      await setReadOnly(false);
    }
    // Sent again with its key, it succeeds once, and nothing was half-written while writes were refused.
    const created = await eventually(async () => {
      const res = await api("POST", "/v1/projects", { name: "ro" }, { "idempotency-key": "ro" });
      expect(res.status).toBe(201);
      return res.body.data;
    });
    expect((await settledDatabase(api, created.database.id)).status).toBe("ready");
    expect((await api("GET", "/v1/projects")).body.data.length).toBe(before + 1);
  });
});
