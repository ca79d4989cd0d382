import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres, templateCluster, type RunningPostgres } from "../../src/postgres/index.ts";
import { createServiceToken } from "../../src/service/domain/tokens.ts";
import { migrate } from "../../src/service/store/migrate.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { client, eventually, settledDatabase, sql, tryConnect, withDatabase } from "./helpers.ts";
import { newLedger, sendUntilDone } from "./faults/traffic.ts";

// Two `mds service` replicas (processes) on one control store, one region server and one backup volume, the client
// sending each request to either of them (a Service in front of two pods). With creates, rotations, backups and a
// restore in flight, the replica running the restore is SIGKILLed while one of its requests is on its way. Every
// request is sent again after a broken connection (to the other replica, with its Idempotency-Key): none is lost
// or done twice, the dead replica's jobs are taken over by the survivor (a job's claim is a row lock of the dead
// process's session, which PostgreSQL ends when the socket closes), and no data is lost. The figures are printed;
// docs/servers.md and BENCHMARKS.md record them.

const node = path.resolve("node_modules/.bin/node");
const fixture = path.resolve("test/service/fixtures/service-process.ts");

type Replica = { name: string; url: string; proc: ChildProcess };

let dir: string;
let postgres: RunningPostgres;
let controlUrl: string;
let token: string;
let otherToken: string;
const key = randomBytes(32);
const replicas: Replica[] = [];

async function startReplica(name: string): Promise<Replica> {
  const config = {
    controlUrl,
    adminUrl: postgres.url,
    backupDir: path.join(dir, "backups"),
    key: key.toString("hex"),
    port: 0,
    instanceId: name,
  };
  const proc = spawn(node, [fixture, JSON.stringify(config)], { stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    proc.once("exit", (code) => reject(new Error(`replica ${name} exited with ${code}`)));
  });
  const replica = { name, url, proc };
  replicas.push(replica);
  return replica;
}

async function stopReplica(replica: Replica, signal: "SIGKILL" | "SIGTERM"): Promise<void> {
  if (replica.proc.exitCode !== null || replica.proc.signalCode !== null) return;
  const exited = new Promise((r) => replica.proc.once("exit", r));
  replica.proc.kill(signal);
  await exited;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-replica-kill-"));
  postgres = await startPostgres({
    dir: path.join(dir, "pg"),
    template: await templateCluster(),
    settings: { fsync: "off", synchronous_commit: "off" },
  });
  await sql(postgres.url, "CREATE DATABASE mds_control");
  controlUrl = withDatabase(postgres.url, "mds_control");
  const pool = createPool(controlUrl, 1);
  await migrate(pool);
  token = (await createServiceToken(pool, { workspace: "default" })).token;
  otherToken = (await createServiceToken(pool, { workspace: "other" })).token;
  await pool.end();
});
afterAll(async () => {
  for (const r of replicas) await stopReplica(r, "SIGTERM");
  await postgres?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a service replica SIGKILLed mid-request, with another replica running", () => {
  it("loses no request, does none twice, and the survivor finishes the dead replica's jobs", async () => {
    const both = await Promise.all([startReplica("replica-a"), startReplica("replica-b")]);
    let alive = [...both];
    const ledger = newLedger();
    const inFlight = new Map<string, number>();
    const sendAs = (as: string, method: string, p: string, body: unknown, k?: string) =>
      sendUntilDone(
        { urls: () => alive.map((r) => r.url), token: as, ledger, brokenIsRetryable: true, inFlight },
        method,
        p,
        body,
        k,
      );
    const send = (method: string, p: string, body: unknown, k?: string) => sendAs(token, method, p, body, k);
    const api = (method: string, p: string) => send(method, p, undefined, undefined);
    const apiOf = (url: string) => client({ url }, token);

    // Before: a database to restore (with a backup of it), one to back up during the kill, one to rotate.
    const project = (await send("POST", "/v1/projects", { name: "replicas", createDatabase: false }, "p")).body.data;
    const other = (await sendAs(otherToken, "POST", "/v1/projects", { name: "other", createDatabase: false }, "p")).body
      .data;
    const database = async (as: string, projectId: string, name: string) => {
      const created = (await sendAs(as, "POST", `/v1/projects/${projectId}/databases`, { name }, `db-${name}`)).body
        .data;
      expect((await settledDatabase(client({ url: both[0].url }, as), created.id)).status).toBe("ready");
      return created;
    };
    const restored = await database(token, project.id, "restored");
    const backedUp = await database(otherToken, other.id, "backed-up");
    const rotated = await database(token, project.id, "rotated");
    await sql(
      restored.connectionString,
      "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 300000) g; CREATE TABLE marker (v text); INSERT INTO marker VALUES ('backup')",
    );
    await sql(
      backedUp.connectionString,
      "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 200000) g",
    );
    const source = (await send("POST", `/v1/databases/${restored.id}/backups`, undefined, "source")).body.data;
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${restored.id}/backups`)).body.data as { status: string }[];
        expect(list.map((b) => b.status)).toEqual(["completed"]);
      },
      { timeoutMs: 60_000 },
    );
    await sql(restored.connectionString, "UPDATE marker SET v = 'after'");

    // During: creates and rotations in a row through both replicas, two backups and a restore.
    const creates: { key: string; id: string; connectionString: string }[] = [];
    const rotations: string[] = [];
    let requestsAtKill: number | undefined = undefined;
    const trafficDone = (i: number) => requestsAtKill !== undefined && i >= requestsAtKill + 4;
    const createLoop = (async () => {
      for (let i = 0; !trafficDone(i); i++) {
        const res = await send("POST", `/v1/projects/${project.id}/databases`, { name: `c${i}` }, `create-${i}`);
        creates.push({ key: `create-${i}`, id: res.body.data.id, connectionString: res.body.data.connectionString });
      }
    })();
    const rotateLoop = (async () => {
      for (let i = 0; !trafficDone(i); i++) {
        const res = await send("POST", `/v1/connections/${rotated.defaultConnectionId}/rotate`, {}, `rotate-${i}`);
        rotations.push(res.body.data.connectionString);
      }
    })();
    await eventually(() => creates.length >= 2 && rotations.length >= 2, { intervalMs: 10 });
    // In a workspace of their own, so its job slots do not make them wait behind this one's restore and provisions.
    const backups = [
      (await sendAs(otherToken, "POST", `/v1/databases/${backedUp.id}/backups`, undefined, "backup-1")).body.data
        .id as string,
      (await sendAs(otherToken, "POST", `/v1/databases/${backedUp.id}/backups`, undefined, "backup-2")).body.data
        .id as string,
    ];
    const restoreRes = await send(
      "POST",
      `/v1/databases/${restored.id}/restore`,
      { source: { type: "backup", databaseId: restored.id, backupId: source.id } },
      "restore-1",
    );
    expect(restoreRes.status).toBe(200);

    // The victim: whichever replica runs the restore, killed once one of its requests is on its way.
    const [running] = await eventually(
      async () => {
        const rows = await sql<{ instance: string }>(
          controlUrl,
          "SELECT r.instance FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore' AND r.finished_at IS NULL",
        );
        expect(rows).toHaveLength(1);
        return rows;
      },
      { intervalMs: 5, timeoutMs: 60_000 },
    );
    const victim = both.find((r) => r.name === running!.instance)!;
    const victimRuns = () =>
      sql<{ job_id: string; kind: string }>(
        controlUrl,
        "SELECT r.job_id, j.kind FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE r.instance = $1 AND r.finished_at IS NULL",
        [victim.name],
      );
    await eventually(() => expect(inFlight.get(victim.url) ?? 0).toBeGreaterThan(0), { intervalMs: 1 });
    const unfinishedAtKill = await victimRuns();
    expect(unfinishedAtKill.map((r) => r.kind)).toContain("restore");
    const inFlightAtKill = inFlight.get(victim.url) ?? 0;
    const killedAt = Date.now();
    await stopReplica(victim, "SIGKILL");
    // The Service stops sending to the dead pod; requests already on their way to it break.
    alive = both.filter((r) => r !== victim);
    const survivor = alive[0]!;
    requestsAtKill = Math.max(creates.length, rotations.length);
    await Promise.all([createLoop, rotateLoop]);
    const survivorApi = apiOf(survivor.url);

    // After: every request succeeded once, nothing twice.
    expect(ledger.violations).toEqual([]);
    expect(ledger.broken).toBeGreaterThan(0);
    const keys = new Set(creates.map((c) => c.key));
    expect(keys.size).toBe(creates.length);
    const named = await sql<{ name: string; n: number }>(
      controlUrl,
      "SELECT name, count(*)::int AS n FROM databases WHERE project_id = $1 AND name ~ '^c[0-9]+$' GROUP BY name",
      [project.id],
    );
    expect(named.filter((r) => r.n !== 1)).toEqual([]);
    expect(named).toHaveLength(creates.length);
    for (const c of creates) {
      expect((await settledDatabase(survivorApi, c.id)).status).toBe("ready");
      expect(await tryConnect(c.connectionString)).toBe(true);
    }
    // The last acknowledged password is the one the server knows.
    expect(await tryConnect(rotations.at(-1)!)).toBe(true);
    expect(await tryConnect(rotations.at(-2)!)).not.toBe(true);

    // The dead replica's jobs: the survivor took each over and finished it; the restore swapped data in once.
    await eventually(
      async () => expect(await sql(controlUrl, "SELECT kind, state FROM jobs WHERE state <> 'done'")).toEqual([]),
      { timeoutMs: 120_000 },
    );
    const takenOver = await sql<{ job_id: string }>(
      controlUrl,
      "SELECT DISTINCT job_id FROM job_runs WHERE job_id = ANY($1) AND instance = $2 AND outcome IS NOT NULL",
      [unfinishedAtKill.map((r) => r.job_id), survivor.name],
    );
    expect(takenOver).toHaveLength(unfinishedAtKill.length);
    expect(
      await sql(
        controlUrl,
        "SELECT r.outcome FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.kind = 'restore' AND r.outcome = 'restored'",
      ),
    ).toHaveLength(1);
    expect((await settledDatabase(survivorApi, restored.id)).status).toBe("ready");
    expect(await sql(restored.connectionString, "SELECT v FROM marker")).toEqual([{ v: "backup" }]);
    expect(await sql(restored.connectionString, "SELECT count(*)::int AS n FROM big")).toEqual([{ n: 300000 }]);
    // The backups are complete archives: each restores the 200,000 rows into a new database.
    const otherApi = client({ url: survivor.url }, otherToken);
    const listed = (await otherApi("GET", `/v1/databases/${backedUp.id}/backups`)).body.data as {
      id: string;
      status: string;
    }[];
    expect(backups.map((id) => listed.find((b) => b.id === id)?.status)).toEqual(["completed", "completed"]);
    const copy = (
      await sendAs(
        otherToken,
        "POST",
        `/v1/projects/${other.id}/databases`,
        { name: "copy", source: { type: "backup", databaseId: backedUp.id, backupId: backups[0] } },
        "copy",
      )
    ).body.data;
    expect((await settledDatabase(otherApi, copy.id)).status).toBe("ready");
    expect(await sql(copy.connectionString, "SELECT count(*)::int AS n FROM big")).toEqual([{ n: 200000 }]);
    // No scratch database of the killed restore is left on the server.
    expect(
      await sql(postgres.url, "SELECT datname FROM pg_database WHERE datname LIKE $1", [
        `${new URL(restored.connectionString).pathname.slice(1)}_r%`,
      ]),
    ).toEqual([]);

    console.log(
      `replica SIGKILLed with ${inFlightAtKill} request(s) in flight and ${unfinishedAtKill.length} job(s) running ` +
        `(${unfinishedAtKill.map((r) => r.kind).join(", ")}): ${ledger.broken} broken connection(s) sent again, ` +
        `${ledger.retryable} answered 503, last at +${Math.max(0, ledger.lastFailureAt - killedAt)} ms; ` +
        `${takenOver.length} job(s) taken over and finished by the survivor; requests lost 0, done twice 0 ` +
        `(${creates.length} creates, ${rotations.length} rotations, 2 backups, 1 restore); rows lost 0 of 300,000 restored`,
    );
  });
});
