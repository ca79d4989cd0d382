import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client, eventually, sql, type Json } from "../service/helpers.ts";

// No exception of a job ends the service. `mds service --embedded` runs as a user runs it, with a preload
// (test/support/throwing-streams.ts) that makes every pg_dump and pg_restore it starts, and every archive it reads,
// throw from a listener placed first on every event of every stream: each throw is uncaught, as the RangeError of a
// table of contents past V8's longest string was. The service keeps answering every workspace, the job that threw
// fails at once with a reason (one attempt: a retry would throw again), and its failure counts against the
// workspace's budget.

const node = path.resolve("node_modules/.bin/node");
const mds = path.resolve("bin/mds.js");
const preload = path.resolve("test/support/throwing-streams.ts");

describe("a job that throws in every stream callback", () => {
  let dir: string;
  let proc: ReturnType<typeof spawn> | undefined;
  let output = "";
  let info: { url: string; token: string };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mds-job-crash-"));
    proc = spawn(node, [mds, "service", "--embedded", dir, "--port", "0", "--spare-databases", "1"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NODE_OPTIONS: `--import=${preload}`, MDS_THROW_WHEN: path.join(dir, "armed") },
    });
    proc.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    proc.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    info = await eventually(
      async () => {
        if (proc!.exitCode !== null) throw new Error(`mds service exited: ${output}`);
        if (!output.includes("mds service listening on")) throw new Error("not yet");
        return JSON.parse(await readFile(path.join(dir, "service.json"), "utf8")) as { url: string; token: string };
      },
      { timeoutMs: 60_000 },
    );
  }, 90_000);
  afterAll(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null)
      await new Promise<void>((resolve) => {
        proc!.once("exit", () => resolve());
        proc!.kill("SIGTERM");
      });
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("fails each such job at once with a reason, and the service keeps answering", async () => {
    const api = client(info, info.token);
    const created = (await api("POST", "/v1/projects", { name: "thrower" })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"), {
      timeoutMs: 30_000,
    });
    // A good backup first, then every pg_dump, pg_restore and archive read throws.
    const good = (await api("POST", `/v1/databases/${id}/backups`)).body.data.id as string;
    await eventually(async () => {
      const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
      expect(list.find((b) => b.id === good)?.status).toBe("completed");
    });
    // First only the data of pg_restore's output: where RangeError was thrown when a listing outgrew V8's longest
    // string, in a listener nothing catches.
    await writeFile(path.join(dir, "armed"), "pg_restore:data");
    const onData = await api("POST", `/v1/databases/${id}/backups`);
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(list.find((b) => b.id === onData.body.data.id)?.status).toBe("failed");
      },
      { timeoutMs: 30_000 },
    );
    // Then every event of every program and archive.
    await writeFile(path.join(dir, "armed"), "");
    const backup = await api("POST", `/v1/databases/${id}/backups`);
    expect(backup.status).toBe(201);
    await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(list.find((b) => b.id === backup.body.data.id)?.status).toBe("failed");
      },
      { timeoutMs: 30_000 },
    );
    const restore = await api("POST", `/v1/databases/${id}/restore`, {
      source: { type: "backup", databaseId: id, backupId: good },
    });
    expect(restore.status).toBe(200);
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("failure"), {
      timeoutMs: 30_000,
    });
    const fromBackup = await api("POST", `/v1/projects/${created.id}/databases`, {
      source: { type: "backup", databaseId: id, backupId: good },
    });
    expect(fromBackup.status).toBe(201);
    await eventually(
      async () =>
        expect((await api("GET", `/v1/databases/${fromBackup.body.data.id}`)).body.data.status).toBe("failure"),
      { timeoutMs: 30_000 },
    );
    // Still the same process, answering this workspace and others.
    expect(proc!.exitCode).toBeNull();
    expect(proc!.signalCode).toBeNull();
    expect((await api("GET", "/v1/projects")).status).toBe(200);
    const other = await api("POST", "/v1/projects", { name: "bystander" });
    expect(other.status).toBe(201);
    expect(output).toMatch(/planted: pg_dump/);
    expect(output).toMatch(/planted: (pg_restore|archive)/);
    const { controlUrl } = JSON.parse(await readFile(path.join(dir, "control.json"), "utf8")) as { controlUrl: string };
    const jobs = await sql<{ kind: string; state: string; error: string; runs: number }>(
      controlUrl,
      `SELECT j.kind, j.state, j.error, (SELECT count(*)::int FROM job_runs r WHERE r.job_id = j.id) AS runs
         FROM jobs j WHERE j.state = 'failed' ORDER BY j.id`,
    );
    const crashed = {
      state: "failed",
      error: expect.stringMatching(/^the job failed on an unexpected error: planted: /),
      runs: 1,
    };
    // Each had one attempt, failed for good, its reason the error that escaped.
    expect(jobs, JSON.stringify(jobs)).toEqual([
      { kind: "backup", ...crashed, error: "the job failed on an unexpected error: planted: pg_restore stdio 1 data" },
      { kind: "backup", ...crashed },
      { kind: "restore", ...crashed },
      { kind: "provision", ...crashed },
    ]);
  }, 90_000);
});
