import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
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
      env: { ...process.env, NODE_OPTIONS: `--import=${preload}` },
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

  it("fails that job at once with a reason, and the service keeps answering", async () => {
    const api = client(info, info.token);
    const created = (await api("POST", "/v1/projects", { name: "thrower" })).body.data;
    const id = created.database.id as string;
    await eventually(async () => expect((await api("GET", `/v1/databases/${id}`)).body.data.status).toBe("ready"), {
      timeoutMs: 30_000,
    });
    const backup = await api("POST", `/v1/databases/${id}/backups`);
    expect(backup.status).toBe(201);
    const failed = await eventually(
      async () => {
        const list = (await api("GET", `/v1/databases/${id}/backups`)).body.data as Json[];
        expect(list[0].status).toBe("failed");
        return list[0];
      },
      { timeoutMs: 30_000 },
    );
    expect(failed.id).toBe(backup.body.data.id);
    // Still the same process, answering this workspace and others.
    expect(proc!.exitCode).toBeNull();
    expect(proc!.signalCode).toBeNull();
    expect((await api("GET", "/v1/projects")).status).toBe(200);
    const other = await api("POST", "/v1/projects", { name: "bystander" });
    expect(other.status).toBe(201);
    expect(output).toMatch(/planted: pg_dump/);
    // One attempt, failed for good, its reason the error that escaped.
    const { controlUrl } = JSON.parse(await readFile(path.join(dir, "control.json"), "utf8")) as { controlUrl: string };
    const runs = await sql<{ state: string; error: string; runs: number }>(
      controlUrl,
      `SELECT j.state, j.error, (SELECT count(*)::int FROM job_runs r WHERE r.job_id = j.id) AS runs
         FROM jobs j WHERE j.kind = 'backup' AND j.payload->>'backupId' = $1`,
      [backup.body.data.id],
    );
    expect(runs).toEqual([
      { state: "failed", error: expect.stringMatching(/^the job failed on an unexpected error: planted: /), runs: 1 },
    ]);
  }, 90_000);
});
