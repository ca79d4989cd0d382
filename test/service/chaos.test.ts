import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort, startPostgres, type RunningPostgres } from "../../src/postgres/index.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";
import { migrate } from "../../src/service/store/migrate.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { client, eventually, sql, tryConnect, withDatabase, type Json } from "./helpers.ts";

// Kill -9 the service during a restore and during provisioning; restart it; everything settles consistently.

const node = path.resolve("node_modules/.bin/node");
const fixture = path.resolve("test/service/fixtures/service-process.ts");

let dir: string;
let postgres: RunningPostgres;
let controlUrl: string;
let token: string;
let port: number;
const config = () =>
  JSON.stringify({
    controlUrl,
    adminUrl: postgres.url,
    backupDir: path.join(dir, "backups"),
    key: key.toString("hex"),
    port,
  });
const key = randomBytes(32);
let child: ChildProcess | undefined;

async function startChild(): Promise<string> {
  const proc = spawn(node, [fixture, config()], { stdio: ["ignore", "pipe", "inherit"] });
  child = proc;
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    proc.once("exit", (code) => reject(new Error(`service exited with ${code}`)));
  });
}

async function kill9(): Promise<void> {
  const proc = child!;
  const exited = new Promise((r) => proc.once("exit", r));
  proc.kill("SIGKILL");
  await exited;
  child = undefined;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-chaos-"));
  postgres = await startPostgres({ dir: path.join(dir, "pg"), settings: { fsync: "off", synchronous_commit: "off" } });
  await sql(postgres.url, "CREATE DATABASE mds_control");
  controlUrl = withDatabase(postgres.url, "mds_control");
  const pool = createPool(controlUrl, 1);
  await migrate(pool);
  token = (await createServiceToken(pool, { workspace: "default" })).token;
  await pool.end();
  port = await findFreePort();
});
afterAll(async () => {
  if (child) await kill9();
  await postgres?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function settled(api: ReturnType<typeof client>, id: string): Promise<Json> {
  return eventually(
    async () => {
      const d = (await api("GET", `/v1/databases/${id}`)).body.data;
      if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
      return d;
    },
    { timeoutMs: 60_000 },
  );
}

describe("a service killed mid-job", () => {
  it("resumes a restore after kill -9: entirely old or entirely new data, never twice, no scratch left", async () => {
    const url = await startChild();
    const api = client({ url }, token);
    const project = (await api("POST", "/v1/projects", { name: "chaos" })).body.data;
    const db = project.database;
    await settled(api, db.id);
    // Enough data that pg_restore takes a moment, so the kill lands while it runs.
    await sql(
      db.connectionString,
      "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 300000) g",
    );
    await sql(db.connectionString, "CREATE TABLE marker (v text); INSERT INTO marker VALUES ('A')");
    const backup = (await api("POST", `/v1/databases/${db.id}/backups`)).body.data;
    await eventually(
      async () => expect((await api("GET", `/v1/databases/${db.id}/backups`)).body.data[0].status).toBe("completed"),
      { timeoutMs: 60_000 },
    );
    await sql(db.connectionString, "UPDATE marker SET v = 'B'");

    const res = await api(
      "POST",
      `/v1/databases/${db.id}/restore`,
      { source: { type: "backup", databaseId: db.id, backupId: backup.id } },
      { "idempotency-key": "chaos-restore" },
    );
    expect(res.status).toBe(200);
    // Wait until the scratch database exists (pg_restore is running into it), then kill.
    await eventually(
      async () =>
        expect(
          await sql(postgres.url, "SELECT datname FROM pg_database WHERE datname LIKE $1", [
            `${new URL(db.connectionString).pathname.slice(1)}_r%`,
          ]),
        ).toHaveLength(1),
      { intervalMs: 5 },
    );
    await kill9();
    // While the service is down, the data is entirely the old one.
    expect(await sql(db.connectionString, "SELECT v FROM marker")).toEqual([{ v: "B" }]);

    const again = client({ url: await startChild() }, token);
    const final = await settled(again, db.id);
    expect(final.status).toBe("ready");
    expect(await sql(db.connectionString, "SELECT v FROM marker")).toEqual([{ v: "A" }]);
    expect(await sql(db.connectionString, "SELECT count(*)::int AS n FROM big")).toEqual([{ n: 300000 }]);
    await eventually(async () =>
      expect(await sql(postgres.url, "SELECT datname FROM pg_database WHERE datname ~ '_[ro][0-9]+$'")).toEqual([]),
    );
    const runs = await sql<{ outcome: string | null }>(
      controlUrl,
      "SELECT r.outcome FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore' ORDER BY r.id",
    );
    expect(runs.filter((r) => r.outcome === "restored")).toHaveLength(1);
    expect(runs.length).toBeGreaterThanOrEqual(2);
    // Posting the same restore again replays; it does not run a second time.
    const replay = await again(
      "POST",
      `/v1/databases/${db.id}/restore`,
      { source: { type: "backup", databaseId: db.id, backupId: backup.id } },
      { "idempotency-key": "chaos-restore" },
    );
    expect(replay.status).toBe(200);
    expect(await sql(controlUrl, "SELECT id FROM jobs WHERE kind = 'restore'")).toHaveLength(1);
    await kill9();
  });

  it("finishes provisioning after kill -9: every database ready and connectable, or none half-made", async () => {
    const url = await startChild();
    const api = client({ url }, token);
    const project = (await api("POST", "/v1/projects", { name: "chaos2", createDatabase: false })).body.data;
    const created = await Promise.all(
      Array.from({ length: 8 }, (_, i) => api("POST", `/v1/projects/${project.id}/databases`, { name: `d${i}` })),
    );
    await kill9();
    const again = client({ url: await startChild() }, token);
    for (const c of created) {
      expect(c.status).toBe(201);
      const d = await settled(again, c.body.data.id);
      expect(d.status).toBe("ready");
      expect(await tryConnect(c.body.data.connectionString)).toBe(true);
    }
    const pending = await sql(controlUrl, "SELECT id FROM jobs WHERE state = 'pending'");
    expect(pending).toEqual([]);
    await kill9();
  });

  it("answers 503 with Retry-After while PostgreSQL is down, and recovers when it is back", async () => {
    const url = await startChild();
    const api = client({ url }, token);
    expect((await api("GET", "/v1/databases?limit=1")).status).toBe(200);
    const pgPort = postgres.port;
    await postgres.stop();
    const down = await api("GET", "/v1/databases?limit=1");
    expect(down.status).toBe(503);
    expect(down.body.error.code).toBe("unavailable");
    expect(Number(down.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    postgres = await startPostgres({
      dir: path.join(dir, "pg"),
      port: pgPort,
      settings: { fsync: "off", synchronous_commit: "off" },
    });
    await eventually(async () => expect((await api("GET", "/v1/databases?limit=1")).status).toBe(200));
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    await kill9();
  });
});
