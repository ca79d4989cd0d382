import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client, eventually } from "./helpers.ts";

// `mds service --embedded DIR` and `mds token …` as a user runs them: through bin/mds.js.

const node = path.resolve("node_modules/.bin/node");
const mds = path.resolve("bin/mds.js");
let dir: string;
const running: { stop(): Promise<number | null> }[] = [];

function run(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(node, [mds, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

async function startServiceProcess(): Promise<{
  url: string;
  token: string;
  stop(): Promise<number | null>;
  kill9(): Promise<void>;
  output(): string;
}> {
  const before = existsSync(path.join(dir, "service.json"))
    ? await readFile(path.join(dir, "service.json"), "utf8")
    : "";
  const proc = spawn(
    node,
    [mds, "service", "--embedded", dir, "--port", "0", "--log-level", "debug", "--spare-databases", "2"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const info = await eventually(
    async () => {
      if (proc.exitCode !== null) throw new Error(`mds service exited: ${output}`);
      const text = await readFile(path.join(dir, "service.json"), "utf8");
      // The CLI prints this line only after service.json is written.
      if (!output.includes("mds service listening on") || text === before) throw new Error("not yet");
      return JSON.parse(text) as { url: string; token: string };
    },
    { timeoutMs: 60_000 },
  );
  return {
    ...info,
    output: () => output,
    kill9: () =>
      new Promise<void>((resolve) => {
        proc.once("exit", () => resolve());
        proc.kill("SIGKILL");
      }),
    stop: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
        proc.once("exit", (code) => resolve(code));
        proc.kill("SIGTERM");
      }),
  };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-cli-"));
});
afterAll(async () => {
  for (const r of running) await r.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("mds service --embedded and mds token", () => {
  it("runs, writes service.json, keeps data and token across a restart, and never logs secrets", async () => {
    const first = await startServiceProcess();
    running.push(first);
    const api = client(first, first.token);
    const created = await api("POST", "/v1/projects", { name: "kept" });
    expect(created.status).toBe(201);
    // A token for another workspace while the service runs: printed as the last line.
    const made = run(["token", "create", "--workspace", "team-a", "--embedded", dir]);
    expect(made.code, made.stderr).toBe(0);
    const newToken = made.stdout.trim().split("\n").at(-1)!;
    expect(newToken).toMatch(/^mds_/);
    expect((await client(first, newToken)("GET", "/v1/databases")).body.data).toEqual([]);
    const listed = run(["token", "list", "--embedded", dir]);
    expect(listed.stdout).toContain("team-a");
    expect(listed.stdout).not.toContain(newToken);
    const id = listed.stdout
      .split("\n")
      .find((l) => l.includes("team-a"))!
      .split("\t")[0]!;
    expect(run(["token", "revoke", id, "--embedded", dir]).code).toBe(0);
    expect((await client(first, newToken)("GET", "/v1/databases")).status).toBe(401);
    await eventually(async () =>
      expect((await api("GET", `/v1/databases/${created.body.data.database.id}`)).body.data.status).toBe("ready"),
    );
    expect(await first.stop()).toBe(0);
    const log = first.output();
    expect(log).not.toContain(first.token);
    expect(log).not.toContain(newToken);
    expect(log).not.toContain(created.body.data.database.directConnection.pass);

    // Same directory: same data, and the token in service.json still works.
    const second = await startServiceProcess();
    running.push(second);
    expect(second.token).toBe(first.token);
    const again = await client(second, second.token)("GET", `/v1/projects/${created.body.data.id}`);
    expect(again.status).toBe(200);
    expect(again.body.data.name).toBe("kept");
    expect(await second.stop()).toBe(0);
  });

  it("starts again after kill -9, taking over the PostgreSQL the dead service left running", async () => {
    const first = await startServiceProcess();
    running.push(first);
    const project = (
      await client(first, first.token)("POST", "/v1/projects", { name: "after-kill", createDatabase: false })
    ).body.data;
    await first.kill9();
    const second = await startServiceProcess();
    running.push(second);
    expect((await client(second, second.token)("GET", `/v1/projects/${project.id}`)).body.data.name).toBe("after-kill");
    // A second service on the same directory while one runs is refused.
    const clash = run(["service", "--embedded", dir, "--port", "0"]);
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain("another mds service is running");
    expect(await second.stop()).toBe(0);
  });

  it("token create works with the service stopped, and bad usage is a clear error", () => {
    const made = run([
      "token",
      "create",
      "--workspace",
      "offline",
      "--scopes",
      "workspace:admin,offline_access",
      "--embedded",
      dir,
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout.trim().split("\n").at(-1)).toMatch(/^mds_/);
    const noWorkspace = run(["token", "create", "--embedded", dir]);
    expect(noWorkspace.code).toBe(2);
    expect(noWorkspace.stderr).toContain("--workspace");
    const noDb = run(["token", "create", "--workspace", "x"]);
    expect(noDb.code).toBe(1);
    expect(noDb.stderr).toMatch(/--embedded DIR or --database-url/);
    const badFlag = run(["service", "--port", "nope", "--embedded", dir]);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain("port");
    const noConfig = run(["service", "--port", "0"]);
    expect(noConfig.code).toBe(1);
    expect(noConfig.stderr).toMatch(/no control database/);
  });

  it("a bad regions file is one clear line naming each mistake: no stack, no password", () => {
    const file = path.join(dir, "regions.yaml");
    const keyFile = path.join(dir, "test.key");
    writeFileSync(keyFile, "00".repeat(32));
    const admin = "postgresql://postgres:Pa55-w0rd@127.0.0.1:5432/postgres";
    const service = (yaml: string) => {
      writeFileSync(file, yaml);
      return run([
        "service",
        "--regions",
        file,
        "--database-url",
        admin,
        "--encryption-key-file",
        keyFile,
        "--backup-dir",
        path.join(dir, "b"),
        "--spare-databases",
        "0",
      ]);
    };
    const bad = service(
      `us-east-1:\n  servers:\n    - { name: pg_a, adminUrl: "${admin}", maxDatabases: 0 }\n    - { name: pg-b, adminUrl: "${admin}", draining: yes-please }\n`,
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe(
      "mds: invalid regions: us-east-1.servers.0.name: a server name is 1 to 63 lowercase letters, digits and dashes, starting and ending with a letter or digit; " +
        "us-east-1.servers.0.maxDatabases: maxDatabases must be at least 1 (to stop new databases on a server, set draining: true); " +
        "us-east-1.servers.1.draining: Invalid input: expected boolean, received string",
    );
    const typo = service(`us-east1:\n  adminUrl: "${admin}"\n`);
    expect(typo.stderr.trim()).toMatch(/^mds: invalid regions: Unrecognized key: "us-east1" \(regions: us-east-1, /);
    const notYaml = service("us-east-1: [\n");
    expect(notYaml.stderr.trim()).toMatch(/^mds: invalid regions: \S+regions\.yaml is not valid YAML: /);
    for (const r of [bad, typo, notYaml]) expect(r.stderr).not.toMatch(/Pa55-w0rd|\n\s+at /);
  });
});
