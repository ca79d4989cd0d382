import { execFile, spawn } from "node:child_process";
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { access, chmod, chown, constants, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import type { Logger } from "pino";
import { PostgresError, PostgresNotFoundError } from "./errors.ts";
import { postgresOsUser } from "./os-user.ts";
import { pinnedSessionOptions } from "./session-options.ts";
import { findFreePort, isAlive } from "./start-postgres.ts";
import type { ServerTls } from "./tls.ts";

// PgBouncer in front of one PostgreSQL server, in transaction mode, for the `pooled` endpoint.
//
// Authentication: clients authenticate to PgBouncer with SCRAM-SHA-256 against the verifier PostgreSQL holds, which
// PgBouncer fetches at every login (`auth_query`) through `pg_catalog.mds_pooler_lookup(name)`: a SECURITY DEFINER
// function that answers only a session of the dedicated role `mds_pooler` and only for ordinary login roles (never a
// superuser, a replication or BYPASSRLS role, the pooler itself or a job login, never an expired one, never a login
// without CONNECT on the database it runs in, which is the one the client asked for). PgBouncer then
// logs in to PostgreSQL as the client with the SCRAM keys of that exchange, so PostgreSQL checks every server login
// itself: a revoked (NOLOGIN, dropped) or rotated login cannot open a server connection, whatever PgBouncer knows.
// No tenant secret and no superuser password is written to a file; the only secret on disk is the password of
// `mds_pooler` (auth_file, 0600, new at every start), a role that can log in and call the lookup, nothing else.
//
// PgBouncer before 1.19 (Debian 12 ships 1.18) runs auth_query in the database the client asked for, not in a
// fixed one (`auth_dbname` came in 1.19). So the lookup function lives in pg_catalog of every database (template1
// included, so every new database has it; pg_catalog is not dumped, so archives never carry it) and `mds_pooler`
// needs CONNECT on each tenant database: `grantPoolerConnect` right after a database is made (the provisioner calls
// it). CONNECT is all it gets there.

export const poolerRole = "mds_pooler";
/** Connections the lookup login may hold, all databases together (see StartPgBouncerOptions.authConnections). */
const defaultAuthConnections = 100;
const lookupFunction = "pg_catalog.mds_pooler_lookup";
const authQuery = `SELECT usename, passwd FROM ${lookupFunction}($1)`;
/** PgBouncer's admin console user: not a PostgreSQL role. */
const adminUser = "mds_pooler_admin";

const lookupSql = `
CREATE OR REPLACE FUNCTION ${lookupFunction}(username text, OUT usename text, OUT passwd text)
RETURNS SETOF record LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT a.rolname::text, a.rolpassword
  FROM pg_catalog.pg_authid a
  WHERE a.rolname = username
    AND session_user = '${poolerRole}'
    AND a.rolcanlogin AND NOT a.rolsuper AND NOT a.rolreplication AND NOT a.rolbypassrls
    AND a.rolname <> '${poolerRole}' AND a.rolname NOT LIKE 'mds\\_job\\_%'
    AND (a.rolvaliduntil IS NULL OR a.rolvaliduntil > now())
    AND a.rolpassword LIKE 'SCRAM-SHA-256$%'
    AND pg_catalog.has_database_privilege(a.oid, pg_catalog.current_database(), 'CONNECT')
$fn$`;

const run = promisify(execFile);

export type PgBouncerBinary = { path: string; version: string };

/**
 * PgBouncer 1.21 and later keep protocol-level prepared statements across transaction-mode server connections
 * (`max_prepared_statements`); before, a client must not use named ones, which Prisma is told by `pgbouncer=true`
 * (Prisma's PgBouncer guide: set it below 1.21, not from 1.21 on).
 */
export function keepsPreparedStatements(version: string): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return major > 1 || (major === 1 && minor >= 21);
}

/** PgBouncer on PATH or at /usr/sbin/pgbouncer (Debian's place, off a normal user's PATH). */
export async function findPgBouncer(
  searchPath = process.env.PATH ?? "",
  fallbacks = ["/usr/sbin/pgbouncer"],
): Promise<PgBouncerBinary> {
  const candidates = [
    ...searchPath
      .split(path.delimiter)
      .filter(Boolean)
      .map((d) => path.join(d, "pgbouncer")),
    ...fallbacks,
  ];
  for (const file of candidates) {
    try {
      await access(file, constants.X_OK);
    } catch {
      continue;
    }
    const { stdout } = await run(file, ["--version"], { timeout: 10_000 }).catch(() => ({ stdout: "" }));
    const version = /PgBouncer (\d+\.\d+(?:\.\d+)?)/.exec(stdout)?.[1];
    if (version) return { path: file, version };
  }
  throw new PostgresNotFoundError(
    "cannot find pgbouncer (searched PATH and /usr/sbin/pgbouncer): install it with `apt-get install pgbouncer`",
  );
}

type Queryable = { query(sql: string, values?: unknown[]): Promise<{ rowCount: number | null }> };

/**
 * Lets the pooler's auth_query reach `database` (CONNECT, nothing more). A no-op on servers without the pooler
 * role (no PgBouncer in front of them). Call it as a superuser after the database is made.
 */
export async function grantPoolerConnect(client: Queryable, database: string): Promise<void> {
  if (!/^[a-z0-9_]{1,63}$/.test(database)) throw new Error(`refusing identifier ${JSON.stringify(database)}`);
  const { rowCount } = await client.query("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", [poolerRole]);
  if (rowCount) await client.query(`GRANT CONNECT ON DATABASE "${database}" TO ${poolerRole}`);
}

/** SCRAM-SHA-256 verifier of `password` (RFC 5802/7677), as PostgreSQL stores it: the password never reaches the server. */
function scramVerifier(password: string): string {
  const salt = randomBytes(16);
  const iterations = 4096;
  const salted = pbkdf2Sync(password.normalize("NFKC"), salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * Superuser set-up on the server behind a pooler: the role `mds_pooler` (LOGIN, a new password, no other
 * attribute), the lookup function in every database that accepts connections (template1 included), and CONNECT on
 * every database owned by a non-superuser (tenant databases; spares, postgres and the control database stay closed).
 */
export async function preparePoolerAuth(
  adminUrl: string,
  password: string,
  logger?: Logger,
  connectionLimit = defaultAuthConnections,
): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  let databases: string[];
  try {
    const exists = (await admin.query("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", [poolerRole])).rowCount;
    const attributes = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT CONNECTION LIMIT ${connectionLimit} PASSWORD '${scramVerifier(password)}'`;
    await admin.query(`${exists ? "ALTER" : "CREATE"} ROLE ${poolerRole} ${attributes}`);
    databases = (
      await admin.query<{ datname: string }>(
        "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY datname",
      )
    ).rows.map((r) => r.datname);
    const tenants = await admin.query<{ datname: string }>(
      `SELECT d.datname FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid = d.datdba
       WHERE NOT r.rolsuper AND NOT pg_catalog.has_database_privilege($1, d.oid, 'CONNECT')`,
      [poolerRole],
    );
    for (const { datname } of tenants.rows) await grantPoolerConnect(admin, datname);
  } finally {
    await admin.end();
  }
  for (const database of databases) {
    // Most of these databases are tenants': their settings must not reach this session (session-options.ts), and a
    // database that still refuses it costs only that tenant's pooled logins (its lookup stays as it was), never the start.
    const client = new pg.Client({
      connectionString: withDatabase(adminUrl, database),
      options: pinnedSessionOptions(10_000),
      connectionTimeoutMillis: 10_000,
    });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query(lookupSql);
      // The default EXECUTE for PUBLIC stays (a changed ACL in pg_catalog would be dumped): the function itself
      // answers nobody but a session of mds_pooler.
    } catch (err) {
      logger?.warn(
        { database, err: { message: (err as Error).message } },
        "cannot set up the pooler's lookup in a database; its pooled logins may fail",
      );
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/** The admin consoles of the running PgBouncers, by the `host:port` of the PostgreSQL server behind them. */
const poolers = new Map<string, Set<AdminConsole>>();
type AdminConsole = { connect(): Promise<pg.Client> };

function serverKeyOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || "5432"}`;
  } catch {
    return undefined;
  }
}

/**
 * PgBouncer keeps a client that logged in before a login's password changed or its LOGIN was taken away: its
 * later transactions run on the pool of that login, whose server connections PgBouncer opens with the keys of the
 * latest client to log in. So ending a login's sessions must end its clients in every PgBouncer in front of the
 * server too: `KILL` of each database where a client of the login is connected (PgBouncer 1.18 has no per-user
 * kill: that database's other pooled clients are disconnected as well and reconnect), then `RESUME`. `pool` is a
 * superuser pool of the server; nothing happens when no PgBouncer of this process is in front of it.
 */
export async function endPooledSessions(pool: pg.Pool, roleName: string): Promise<void> {
  const url = (pool as unknown as { options?: { connectionString?: string } }).options?.connectionString;
  const key = url ? serverKeyOf(url) : undefined;
  const consoles = key ? poolers.get(key) : undefined;
  if (!consoles?.size) return;
  for (const console of consoles) {
    // A PgBouncer that does not answer (it died) holds no clients: nothing of it to end.
    const admin = await console.connect().catch(() => undefined);
    if (!admin) continue;
    try {
      // Only databases where a client of this login is connected: a login nobody uses (the operator revoking one
      // whose password it lost) disconnects nobody.
      const clients = await admin.query<{ user: string; database: string }>("SHOW CLIENTS");
      const databases = new Set(clients.rows.filter((c) => c.user === roleName).map((c) => c.database));
      for (const database of databases) {
        if (!/^[a-z0-9_]{1,63}$/.test(database)) continue;
        await admin.query(`KILL ${database}`).catch(() => {});
        await admin.query(`RESUME ${database}`).catch(() => {});
      }
    } finally {
      await admin.end().catch(() => {});
    }
  }
}

/**
 * What the PgBouncers in front of the server (those this process runs) know of a login: `clients`, its client
 * connections (an app that holds one still uses the login, whether or not a server connection serves it now), and
 * `serverPids`, the PostgreSQL backends PgBouncer holds for it. Those backends are PgBouncer's, not an app's: in
 * transaction mode one stays in the pool, idle, for `server_idle_timeout` after every client has left, so a count of
 * the login's sessions must leave them out and count the clients instead. Undefined when no PgBouncer of this process
 * is in front of the server (its backends cannot be told apart then).
 */
export async function pooledUseOf(
  pool: pg.Pool,
  roleName: string,
): Promise<{ clients: number; serverPids: Set<number> } | undefined> {
  const url = (pool as unknown as { options?: { connectionString?: string } }).options?.connectionString;
  const key = url ? serverKeyOf(url) : undefined;
  const consoles = key ? poolers.get(key) : undefined;
  if (!consoles?.size) return undefined;
  const use = { clients: 0, serverPids: new Set<number>() };
  for (const console of consoles) {
    // One that refuses connections (it died) holds no clients, and its server connections are closing. Any other
    // failure throws: a count that left out a live PgBouncer's clients could get a login revoked under them.
    const admin = await console.connect().catch((err: unknown) => {
      if ((err as { code?: unknown }).code === "ECONNREFUSED") return undefined;
      throw err;
    });
    if (!admin) continue;
    try {
      const clients = await admin.query<{ user: string }>("SHOW CLIENTS");
      use.clients += clients.rows.filter((c) => c.user === roleName).length;
      const servers = await admin.query<{ user: string; remote_pid: string | number }>("SHOW SERVERS");
      for (const s of servers.rows) if (s.user === roleName) use.serverPids.add(Number(s.remote_pid));
    } finally {
      await admin.end().catch(() => {});
    }
  }
  return use;
}

export type StartPgBouncerOptions = {
  /** Holds pgbouncer.ini, the auth file (0600), the pid file and the last port used. */
  dir: string;
  /** The PostgreSQL server: where PgBouncer connects, and a superuser URL for the set-up (never written anywhere). */
  server: { host: string; port: number; adminUrl: string };
  /** The certificate PgBouncer shows clients (the server's own will do), and the CA it checks the server against. */
  tls: ServerTls;
  /** 0 or absent: the port of the previous start if free, else a free one. */
  port?: number;
  /** Server connections per database and user (`default_pool_size`). */
  poolSize?: number;
  /** Server connections per database, all users together (`max_db_connections`). */
  maxDbConnections?: number;
  /** Client connections in all (`max_client_conn`). */
  maxClientConnections?: number;
  /**
   * Connections of the lookup login (`mds_pooler`), all databases together: its `CONNECTION LIMIT` in PostgreSQL and
   * its `max_user_connections` in PgBouncer, which then closes the longest idle of them (in whatever database) to make
   * room for a lookup in another. Default 100.
   */
  authConnections?: number;
  logger?: Logger;
  binary?: PgBouncerBinary;
};

export type RunningPgBouncer = {
  host: string;
  port: number;
  version: string;
  /** Whether clients may use named prepared statements here (else Prisma needs `pgbouncer=true`). */
  preparedStatements: boolean;
  poolSize: number;
  maxDbConnections: number;
  stop(): Promise<void>;
};

/** A PgBouncer left running on `dir` by a process killed with -9 is stopped: its port and pool would linger. */
async function stopOrphan(pidFile: string, configFile: string, logger: Logger | undefined): Promise<void> {
  const pid = Number((await readFile(pidFile, "utf8").catch(() => "")).trim());
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("pgbouncer") && cmdline.includes(configFile)) {
      logger?.warn({ pid }, "stopping an orphaned PgBouncer on our directory");
      process.kill(pid, "SIGTERM");
      for (let waited = 0; isAlive(pid); waited += 50) {
        if (waited === 5000) process.kill(pid, "SIGKILL");
        if (waited > 10_000)
          throw new PostgresError(
            "already_running",
            `cannot stop the orphaned PgBouncer (pid ${pid}) on ${path.dirname(pidFile)}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
  await rm(pidFile, { force: true });
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

async function portIsFree(host: string, port: number): Promise<boolean> {
  return !(await canConnect(host, port));
}

const quote = (value: string): string => `"${value.replace(/"/g, '""')}"`;

/**
 * Starts PgBouncer in front of `server` (transaction pooling, SCRAM with auth_query, TLS towards clients required
 * and towards the server verified) and returns once it accepts connections. As root it runs as the `postgres` OS
 * user (PgBouncer refuses root). `stop()` is immediate (SIGTERM) and idempotent; PgBouncer is also killed if this
 * process exits without stopping it.
 */
export async function startPgBouncer(options: StartPgBouncerOptions): Promise<RunningPgBouncer> {
  const binary = options.binary ?? (await findPgBouncer());
  const user = await postgresOsUser();
  const dir = path.resolve(options.dir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  if (user) await chown(dir, user.uid, user.gid);
  const configFile = path.join(dir, "pgbouncer.ini");
  const authFile = path.join(dir, "auth_file.txt");
  const pidFile = path.join(dir, "pgbouncer.pid");
  const portFile = path.join(dir, "port");
  await stopOrphan(pidFile, configFile, options.logger);

  const password = randomBytes(24).toString("base64url");
  const authConnections = options.authConnections ?? defaultAuthConnections;
  await preparePoolerAuth(options.server.adminUrl, password, options.logger, authConnections);
  // The admin console's user exists only in PgBouncer: its SCRAM verifier is in the auth file, its password only in
  // this process's memory (for KILL/RESUME when a login's sessions end).
  const adminPassword = randomBytes(24).toString("base64url");
  await writeFile(
    authFile,
    `${quote(poolerRole)} ${quote(password)}\n${quote(adminUser)} ${quote(scramVerifier(adminPassword))}\n`,
    { mode: 0o600 },
  );
  await chmod(authFile, 0o600);
  if (user) await chown(authFile, user.uid, user.gid);

  const host = "127.0.0.1";
  const poolSize = options.poolSize ?? 10;
  const maxDbConnections = options.maxDbConnections ?? 2 * poolSize;
  const previous = Number((await readFile(portFile, "utf8").catch(() => "")).trim());
  for (let attempt = 0; ; attempt++) {
    const fixed = options.port !== undefined && options.port > 0;
    const port = fixed
      ? options.port!
      : attempt === 0 && previous > 0 && (await portIsFree(host, previous))
        ? previous
        : await findFreePort(host);
    const settings: Record<string, string | number> = {
      listen_addr: host,
      listen_port: port,
      unix_socket_dir: "",
      pidfile: pidFile,
      auth_type: "scram-sha-256",
      auth_file: authFile,
      auth_user: poolerRole,
      auth_query: authQuery,
      pool_mode: "transaction",
      default_pool_size: poolSize,
      min_pool_size: 0,
      reserve_pool_size: 0,
      max_db_connections: maxDbConnections,
      max_client_conn: options.maxClientConnections ?? 1000,
      // Idle server connections go after a minute; none lives longer than an hour (a changed server setting reaches them).
      server_idle_timeout: 60,
      server_lifetime: 3600,
      // Drivers send these at startup; PgBouncer cannot keep them per client in transaction mode.
      ignore_startup_parameters: "extra_float_digits",
      ...(keepsPreparedStatements(binary.version) ? { max_prepared_statements: 200 } : {}),
      client_tls_sslmode: "require",
      client_tls_cert_file: options.tls.certFile,
      client_tls_key_file: options.tls.keyFile,
      server_tls_sslmode: "verify-full",
      server_tls_ca_file: options.tls.caFile,
      admin_users: adminUser,
      log_connections: 0,
      log_disconnections: 0,
      application_name_add_host: 0,
    };
    // PgBouncer runs the lookup in the database each client names, and keeps that connection idle for
    // server_idle_timeout: without a cap of its own, failed logins naming as many databases as PostgreSQL lets the
    // lookup login hold would pin all of them, and every other tenant's pooled login would fail meanwhile. At the cap,
    // PgBouncer evicts the lookup login's longest idle connection instead of asking PostgreSQL for one more.
    const users = `${poolerRole} = max_user_connections=${authConnections}`;
    const ini = `[databases]\n* = host=${options.server.host} port=${options.server.port}\n\n[users]\n${users}\n\n[pgbouncer]\n${Object.entries(
      settings,
    )
      .map(([k, v]) => `${k} = ${v}`)
      .join("\n")}\n`;
    await writeFile(configFile, ini, { mode: 0o600 });
    if (user) await chown(configFile, user.uid, user.gid);

    const child = spawn(binary.path, [configFile], {
      stdio: ["ignore", "pipe", "pipe"],
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let log = "";
    let exited = false;
    child.once("exit", () => (exited = true));
    const onData = (d: Buffer) => {
      log = (log + d.toString()).slice(-20_000);
      if (options.logger)
        for (const line of d.toString().split("\n"))
          if (line.trim()) options.logger.debug({ pgbouncer: line }, "pgbouncer");
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("error", () => (exited = true));
    let ready = false;
    for (let waited = 0; waited < 15_000 && !exited; waited += 50) {
      if (/listening on/i.test(log) && (await canConnect(host, port))) {
        ready = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!ready) {
      child.kill("SIGKILL");
      if (attempt < 3 && !fixed && /Address already in use|bind/i.test(log)) continue;
      throw new PostgresError("start_failed", `PgBouncer did not start: ${log.trim().slice(-2000)}`);
    }
    await writeFile(portFile, `${port}\n`);
    const serverKey = `${options.server.host}:${options.server.port}`;
    const adminConsole: AdminConsole = {
      async connect() {
        const client = new pg.Client({
          host,
          port,
          user: adminUser,
          password: adminPassword,
          database: "pgbouncer",
          ssl: { ca: options.tls.caCert },
          connectionTimeoutMillis: 5000,
        });
        client.on("error", () => {});
        await client.connect();
        return client;
      },
    };
    const registered = poolers.get(serverKey) ?? new Set<AdminConsole>();
    registered.add(adminConsole);
    poolers.set(serverKey, registered);
    options.logger?.info({ port, version: binary.version, poolSize, maxDbConnections }, "PgBouncer started");
    const onExit = () => child.kill("SIGKILL");
    process.once("exit", onExit);
    const done = new Promise<void>((resolve) =>
      exited || child.exitCode !== null ? resolve() : child.once("exit", () => resolve()),
    );
    void done.then(() => process.off("exit", onExit));
    let stopping: Promise<void> | undefined;
    return {
      host,
      port,
      version: binary.version,
      preparedStatements: keepsPreparedStatements(binary.version),
      poolSize,
      maxDbConnections,
      stop() {
        stopping ??= (async () => {
          poolers.get(serverKey)?.delete(adminConsole);
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
          await done;
          clearTimeout(timer);
          await rm(pidFile, { force: true });
          options.logger?.info({ port }, "PgBouncer stopped");
        })();
        return stopping;
      },
    };
  }
}
