import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmod, chown, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import type { Logger } from "pino";
import { PostgresError } from "./errors.ts";
import { findPostgresBinaries, type PostgresBinaries } from "./find-binaries.ts";
import { postgresOsUser, type OsUser } from "./os-user.ts";
import { ensureServerTls, type ServerTls } from "./tls.ts";

export type StartPostgresOptions = {
  /** Directory that holds the cluster (`DIR/data`) and its superuser password; created on first use. */
  dir: string;
  /** 0 or absent: a free port. */
  port?: number;
  logger?: Logger;
  /** Extra server settings (`-c name=value`), e.g. `{ fsync: "off" }` for throwaway test servers. */
  settings?: Record<string, string>;
  binaries?: PostgresBinaries;
  /**
   * A directory made by `templateCluster()`: on first use its cluster is copied instead of running initdb
   * (several times faster; tests use it). The copy shares the template's superuser password.
   */
  template?: string;
  /**
   * A server still running on `dir` (its owner died, e.g. kill -9 of the process that started it) is shut down and
   * replaced instead of refusing to start. Only for directories this process owns.
   */
  takeOver?: boolean;
  /**
   * TLS (`ssl=on`): a CA kept in `dir/tls` and a server certificate for 127.0.0.1, localhost, ::1 and `hosts`,
   * re-issued at every start. Plain connections are still accepted (the service's own sessions on loopback use them).
   */
  tls?: boolean | { hosts?: string[] };
};

export type RunningPostgres = {
  /** Superuser URL (holds the password: never log it). */
  url: string;
  host: string;
  port: number;
  bindir: string;
  version: number;
  /** With `tls`: the CA (PEM and file) that signed the server's certificate, and the certificate and key files. */
  tls?: ServerTls;
  stop(): Promise<void>;
};

const superuser = "postgres";

export async function findFreePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

function runToEnd(
  command: string,
  args: string[],
  user: OsUser | undefined,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code: code ?? 1, output }));
  });
}

async function initCluster(
  bin: PostgresBinaries,
  dir: string,
  dataDir: string,
  user: OsUser | undefined,
): Promise<void> {
  const password = randomBytes(18).toString("base64url");
  const pwfile = path.join(dir, "superuser-password");
  await writeFile(pwfile, password + "\n", { mode: 0o600 });
  if (user) await chown(pwfile, user.uid, user.gid);
  // Build into a temporary directory and rename: an interrupted initdb never leaves a half cluster behind.
  const tmp = `${dataDir}.init`;
  await rm(tmp, { recursive: true, force: true });
  const result = await runToEnd(
    path.join(bin.bindir, "initdb"),
    [
      "-D",
      tmp,
      "-U",
      superuser,
      `--pwfile=${pwfile}`,
      "--auth-local=scram-sha-256",
      "--auth-host=scram-sha-256",
      "-E",
      "UTF8",
      "--locale=C.UTF-8",
      "--no-sync",
    ],
    user,
  );
  if (result.code !== 0)
    throw new PostgresError(
      "initdb_failed",
      `cannot initialise PostgreSQL in ${dataDir}: initdb failed: ${result.output.trim()}`,
    );
  await rename(tmp, dataDir);
}

async function copyCluster(template: string, dir: string, dataDir: string): Promise<void> {
  const tmp = `${dataDir}.init`;
  await rm(tmp, { recursive: true, force: true });
  // cp -a keeps the owner (the postgres OS user) and the 0700 mode PostgreSQL insists on.
  const result = await runToEnd("cp", ["-a", path.join(template, "data"), tmp], undefined);
  if (result.code !== 0)
    throw new PostgresError("initdb_failed", `cannot copy the template cluster ${template}: ${result.output.trim()}`);
  const copied = await runToEnd(
    "cp",
    ["-a", path.join(template, "superuser-password"), path.join(dir, "superuser-password")],
    undefined,
  );
  if (copied.code !== 0)
    throw new PostgresError("initdb_failed", `cannot copy the template cluster ${template}: ${copied.output.trim()}`);
  await rename(tmp, dataDir);
}

/**
 * An initialised, never-started cluster under `root` (default: the OS temp directory), made once per PostgreSQL
 * binaries and reused: startPostgres({ template }) copies it instead of running initdb. Safe under concurrency:
 * each maker builds in its own directory and the first rename wins.
 */
export async function templateCluster(options: { root?: string; binaries?: PostgresBinaries } = {}): Promise<string> {
  const bin = options.binaries ?? (await findPostgresBinaries());
  const user = await postgresOsUser();
  const root = options.root ?? path.join(tmpdir(), "mds-pg-templates");
  const dir = path.join(root, `pg${bin.version}-${createHash("sha256").update(bin.bindir).digest("hex").slice(0, 8)}`);
  if ((await exists(path.join(dir, "data", "PG_VERSION"))) && (await exists(path.join(dir, "superuser-password"))))
    return dir;
  await mkdir(root, { recursive: true, mode: 0o755 });
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  await prepareDir(tmp, user);
  await initCluster(bin, tmp, path.join(tmp, "data"), user);
  try {
    await rename(tmp, dir);
  } catch {
    await rm(tmp, { recursive: true, force: true });
  }
  return dir;
}

async function prepareDir(dir: string, user: OsUser | undefined): Promise<void> {
  await mkdir(dir, { recursive: true });
  if (user) {
    // The server runs as the unprivileged user: it must own its directory and reach it.
    await chown(dir, user.uid, user.gid);
    const mode = (await stat(dir)).mode & 0o777;
    if ((mode & 0o700) !== 0o700) await chmod(dir, mode | 0o700);
    await letThrough(path.dirname(path.resolve(dir)), user);
  }
}

/**
 * The server's user must pass through every directory above its own. One that shuts it out (a 0700 home or temporary
 * directory) gets an ACL entry for that user alone: widening its mode to 0711 would open it to every OS user.
 * Walks from the root down, so each check runs with the directories above it already passable.
 */
async function letThrough(dir: string, user: OsUser): Promise<void> {
  const chain: string[] = [];
  for (let d = dir; d !== path.dirname(d); d = path.dirname(d)) chain.unshift(d);
  for (const d of chain) {
    // access(2) as that user, ACLs included: the question asked the way the server will meet it.
    if ((await runToEnd("test", ["-x", d], user)).code === 0) continue;
    const granted = await runToEnd("setfacl", ["-m", `u:${user.uid}:x`, d], undefined).catch(
      (err: NodeJS.ErrnoException) => ({ code: err.code === "ENOENT" ? -1 : -2, output: err.message }),
    );
    if (granted.code !== 0) {
      const why =
        granted.code === -1
          ? "setfacl is not installed (Debian package `acl`)"
          : `setfacl failed: ${granted.output.trim()}`;
      throw new PostgresError(
        "directory_unreachable",
        `the postgres OS user cannot reach ${dir}: ${d} is closed to it, and mds does not open a directory to every user (${why}). Install \`acl\`, or run \`chmod o+x ${d}\` yourself, or choose a directory that user can reach`,
      );
    }
  }
}

/** Waits until the server accepts a superuser login, or fails with its log if it exits first. */
async function waitReady(url: string, child: ChildProcess, output: () => string): Promise<void> {
  let exited = false;
  child.once("exit", () => (exited = true));
  for (let attempt = 0; ; attempt++) {
    if (exited)
      throw new PostgresError("start_failed", `PostgreSQL exited during start: ${output().trim().slice(-2000)}`);
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query("select 1");
      await client.end();
      return;
    } catch {
      await client.end().catch(() => {});
      if (attempt > 600)
        throw new PostgresError(
          "start_failed",
          `PostgreSQL did not accept connections: ${output().trim().slice(-2000)}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * Runs a private PostgreSQL server over `dir` (initdb on first use). When we are root, the server runs as the
 * `postgres` OS user, because postgres refuses to run as root. Data survives a stop and a new start on the same dir.
 */
export async function startPostgres(options: StartPostgresOptions): Promise<RunningPostgres> {
  const bin = options.binaries ?? (await findPostgresBinaries());
  const user = await postgresOsUser();
  const dir = path.resolve(options.dir);
  const dataDir = path.join(dir, "data");
  await prepareDir(dir, user);
  if (!(await exists(path.join(dataDir, "PG_VERSION")))) {
    if (options.template) await copyCluster(options.template, dir, dataDir);
    else await initCluster(bin, dir, dataDir, user);
  }
  const password = (await readFile(path.join(dir, "superuser-password"), "utf8")).trim();
  // A postmaster.pid left by a killed server would make postgres refuse to start if its pid got reused.
  const pidFile = path.join(dataDir, "postmaster.pid");
  if (await exists(pidFile)) await clearStalePid(pidFile, options.takeOver ?? false, options.logger);

  const host = "127.0.0.1";
  const tls = options.tls
    ? await ensureServerTls(path.join(dir, "tls"), {
        hosts: typeof options.tls === "object" ? (options.tls.hosts ?? []) : [],
        owner: user,
      })
    : undefined;
  for (let attempt = 0; ; attempt++) {
    const port = options.port && options.port > 0 ? options.port : await findFreePort(host);
    const settings: Record<string, string> = {
      listen_addresses: host,
      port: String(port),
      unix_socket_directories: "",
      max_connections: "200",
      shared_buffers: "64MB",
      // A failing statement is not echoed into the server log: CREATE/ALTER ROLE statements carry password verifiers.
      log_min_error_statement: "panic",
      ...(tls ? { ssl: "on", ssl_cert_file: tls.certFile, ssl_key_file: tls.keyFile } : {}),
      ...options.settings,
    };
    const args = ["-D", dataDir, ...Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`])];
    const child = spawn(path.join(bin.bindir, "postgres"), args, {
      stdio: ["ignore", "pipe", "pipe"],
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let log = "";
    const onData = (d: Buffer) => {
      log = (log + d.toString()).slice(-20_000);
      if (options.logger)
        for (const line of d.toString().split("\n"))
          if (line.trim()) options.logger.debug({ postgres: line }, "postgres");
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    const url = `postgresql://${superuser}:${encodeURIComponent(password)}@${host}:${port}/postgres`;
    try {
      await waitReady(url, child, () => log);
    } catch (err) {
      child.kill("SIGKILL");
      // Someone took the free port between our probe and the bind: try another one.
      if (attempt < 3 && !(options.port && options.port > 0) && /could not bind|Address already in use/i.test(log))
        continue;
      throw err;
    }
    options.logger?.info({ port, dataDir, version: bin.version }, "PostgreSQL started");
    // If this process exits without stopping the server (an uncaught error, process.exit), take the server down too.
    const onExit = () => child.kill("SIGQUIT");
    process.once("exit", onExit);
    child.once("exit", () => process.off("exit", onExit));
    let stopping: Promise<void> | undefined;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    return {
      url,
      host,
      port,
      bindir: bin.bindir,
      version: bin.version,
      ...(tls ? { tls } : {}),
      stop() {
        stopping ??= (async () => {
          // SIGINT = fast shutdown: disconnect clients, checkpoint, exit. Escalate if it hangs.
          child.kill("SIGINT");
          const timer = setTimeout(() => child.kill("SIGQUIT"), 15_000);
          await exited;
          clearTimeout(timer);
          options.logger?.info({ dataDir }, "PostgreSQL stopped");
        })();
        return stopping;
      },
    };
  }
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function clearStalePid(pidFile: string, takeOver: boolean, logger: Logger | undefined): Promise<void> {
  const pid = Number((await readFile(pidFile, "utf8")).split("\n")[0]);
  // Alive and a postgres: the file is meaningful. A dead or reused pid is a leftover of a killed server.
  if (
    Number.isInteger(pid) &&
    pid > 0 &&
    isAlive(pid) &&
    (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).includes("postgres")
  ) {
    if (!takeOver)
      throw new PostgresError(
        "already_running",
        `cannot start PostgreSQL: another server (pid ${pid}) is running on ${path.dirname(pidFile)}`,
      );
    logger?.warn({ pid }, "shutting down an orphaned PostgreSQL server on our directory");
    process.kill(pid, "SIGINT");
    for (let waited = 0; isAlive(pid); waited += 50) {
      if (waited === 15_000) process.kill(pid, "SIGQUIT");
      if (waited > 30_000)
        throw new PostgresError(
          "already_running",
          `cannot stop the orphaned PostgreSQL server (pid ${pid}) on ${path.dirname(pidFile)}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  await rm(pidFile, { force: true });
}
