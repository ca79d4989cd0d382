import { spawn } from "node:child_process";
import { copyFile, chown, readdir, readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import {
  findPostgresBinaries,
  postgresOsUser,
  startPostgres,
  templateCluster,
  type RunningPostgres,
} from "../../src/postgres/index.ts";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.ts";

// A primary and a synchronous streaming standby behind one endpoint: what a CloudNativePG cluster with
// `minSyncReplicas: 1` and its `-rw` Service look like to the service. The endpoint is a TCP proxy standing in for
// the Service; `failover()` does what the HA system does when the primary's node dies: the primary and every one of
// its backends are SIGKILLed, the endpoint has no ready pod, the standby is promoted and the endpoint points at it.

export type ReplicatedPostgres = {
  /** Superuser URL through the endpoint (holds the password: never log it). */
  url: string;
  /** The endpoint's port: what the service and tenants are given. */
  port: number;
  proxy: TcpProxy;
  /** Kills the primary (SIGKILL, with its backends), promotes the standby and moves the endpoint. */
  failover(): Promise<{ downMs: number }>;
  stop(): Promise<void>;
};

const standbyName = "standby1";

function run(command: string, args: string[], options: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv }) {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(command)} failed: ${output.trim()}`)),
    );
  });
}

async function query(url: string, text: string): Promise<pg.QueryResultRow[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on("error", () => {});
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The postmaster's pid, from its data directory. */
async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await readFile(path.join(dataDir, "postmaster.pid"), "utf8")).split("\n")[0]);
}

/** SIGKILL a postmaster and every backend it forked, the way a node failure ends them (no shutdown, no goodbye). */
async function killServer(pid: number): Promise<void> {
  // Stopped first, so it forks nothing between the listing of its children and their end.
  process.kill(pid, "SIGSTOP");
  const children: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // Field 4 (after the parenthesised command, which may hold spaces) is the parent pid.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === pid) children.push(Number(entry));
  }
  for (const child of children) process.kill(child, "SIGKILL");
  process.kill(pid, "SIGKILL");
}

export async function startReplicatedPostgres(options: {
  dir: string;
  settings?: Record<string, string>;
}): Promise<ReplicatedPostgres> {
  const settings = { fsync: "off", full_page_writes: "off", ...options.settings };
  const primaryDir = path.join(options.dir, "primary");
  const standbyDir = path.join(options.dir, "standby");
  // Every commit waits for the standby to have the WAL on disk (remote flush): what `minSyncReplicas: 1` promises.
  const primary = await startPostgres({
    dir: primaryDir,
    template: await templateCluster(),
    settings: { ...settings, synchronous_commit: "on", synchronous_standby_names: standbyName },
  });
  const user = await postgresOsUser();
  const password = (await readFile(path.join(primaryDir, "superuser-password"), "utf8")).trim();
  const bin = await findPostgresBinaries();
  const osUser = user ? { uid: user.uid, gid: user.gid } : {};
  const standbyData = path.join(standbyDir, "data");
  let standby: RunningPostgres | undefined;
  let proxy: TcpProxy | undefined;
  try {
    await run("mkdir", ["-p", standbyDir], {});
    if (user) await chown(standbyDir, user.uid, user.gid);
    await run(
      path.join(bin.bindir, "pg_basebackup"),
      ["-h", primary.host, "-p", String(primary.port), "-U", "postgres", "-D", standbyData, "-X", "stream"],
      { ...osUser, env: { ...process.env, PGPASSWORD: password } },
    );
    await copyFile(path.join(primaryDir, "superuser-password"), path.join(standbyDir, "superuser-password"));
    await run("touch", [path.join(standbyData, "standby.signal")], {});
    if (user) await chown(path.join(standbyData, "standby.signal"), user.uid, user.gid);
    standby = await startPostgres({
      dir: standbyDir,
      settings: {
        ...settings,
        primary_conninfo: `host=${primary.host} port=${primary.port} user=postgres password=${password} application_name=${standbyName}`,
      },
    });
    // Synchronous from here on: the primary names the standby as its sync standby.
    for (let waited = 0; ; waited += 50) {
      const rows = await query(primary.url, "SELECT sync_state FROM pg_stat_replication");
      if (rows[0]?.sync_state === "sync") break;
      if (waited > 30_000) throw new Error("the standby did not become synchronous within 30 s");
      await new Promise((r) => setTimeout(r, 50));
    }
    proxy = await startTcpProxy({ targetHost: primary.host, targetPort: primary.port, protocol: "postgresql" });
  } catch (err) {
    await standby?.stop();
    await primary.stop();
    throw err;
  }
  const endpoint = proxy;
  const promoted = standby;
  const url = new URL(primary.url);
  url.port = String(endpoint.port);
  let failedOver = false;
  return {
    url: url.toString(),
    port: endpoint.port,
    proxy: endpoint,
    async failover() {
      if (failedOver) throw new Error("already failed over");
      failedOver = true;
      const started = Date.now();
      // The endpoint loses its pod with the node: no new connection reaches anything until the standby is primary.
      endpoint.retarget(undefined);
      await killServer(await postmasterPid(path.join(primaryDir, "data")));
      await primary.stop();
      // pg_ctl rather than SELECT pg_promote(): a session on the standby can be cancelled by the replay of the
      // primary's last WAL (a conflict with recovery), pg_ctl only signals the server and waits for the promotion.
      await run(path.join(bin.bindir, "pg_ctl"), ["promote", "-w", "-t", "60", "-D", standbyData], osUser);
      endpoint.retarget(promoted.port);
      return { downMs: Date.now() - started };
    },
    async stop() {
      await endpoint.stop();
      await promoted.stop();
      await primary.stop();
    },
  };
}
