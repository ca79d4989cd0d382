import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import tls from "node:tls";
import pg from "pg";
import type { Logger } from "pino";
import { regionIds } from "../../contract/index.ts";
import { startPostgres, type RunningPgBouncer, type RunningPostgres, type ServerTls } from "../../postgres/index.ts";
import { parseKey, randomSecret } from "../shared/crypto.ts";
import { defaultServerName, ServerName, type RegionInput, type RegionSettings } from "../config/config.ts";
import {
  serverDir,
  shareCa,
  startServerPgBouncer,
  startServerPostgres,
  type EmbeddedServer,
  type EmbeddedServerStack,
  type ServerStackOptions,
} from "./servers.ts";
import { startService, type RunningService, type StartServiceOptions } from "../start/service.ts";
import { migrate } from "../store/migrate.ts";
import { createPool } from "../store/pool.ts";
import { createServiceToken, findPrincipal } from "../domain/tokens.ts";

const controlDatabase = "mds_control";

/** The control database URL of an embedded directory whose server runs, if it answers. */
async function runningEmbeddedControlUrl(dir: string): Promise<string | undefined> {
  try {
    const { controlUrl } = JSON.parse(await readFile(path.join(dir, "control.json"), "utf8")) as {
      controlUrl?: unknown;
    };
    if (typeof controlUrl !== "string") return undefined;
    const client = new pg.Client({ connectionString: controlUrl, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      return controlUrl;
    } finally {
      await client.end().catch(() => {});
    }
  } catch {
    return undefined;
  }
}

/** Runs `fn` against the control database of an embedded directory, starting its PostgreSQL if the service is not running. */
export async function withEmbeddedControl<T>(dir: string, fn: (controlUrl: string) => Promise<T>): Promise<T> {
  const running = await runningEmbeddedControlUrl(dir);
  if (running) return fn(running);
  const postgres = await startPostgres({ dir: path.join(path.resolve(dir), "postgres") });
  try {
    await ensureDatabase(postgres.url, controlDatabase);
    return await fn(withDatabase(postgres.url, controlDatabase));
  } finally {
    await postgres.stop();
  }
}

export type EmbeddedServiceOptions = {
  dir: string;
  host?: string;
  port?: number;
  baseUrl?: string;
  logger?: Logger;
  /** PostgreSQL's port (default: a free one). `mds dev` keeps it fixed: connection strings in Secrets name it. */
  postgresPort?: number;
  /** Extra PostgreSQL settings (tests turn fsync off). */
  postgresSettings?: Record<string, string>;
  /** A `templateCluster()` directory to copy instead of running initdb (tests). */
  postgresTemplate?: string;
  /** Settings every region gets (connection limits, sslmode, …; see RegionConfig). */
  regionSettings?: RegionSettings;
  /**
   * The servers of every region (default: one, named `default`). The first is DIR/postgres; each further one runs
   * under DIR/servers/<name>/ with its own data directory, certificate (same CA) and PgBouncer. New databases go to
   * the one with the most room (`maxDatabases`), never to a `draining` one.
   */
  servers?: EmbeddedServer[];
  /**
   * PgBouncer in front of the server for the `pooled` endpoint (default true; needs the `pgbouncer` package). false:
   * `pooled` is the server itself, as before.
   */
  pooler?: boolean | { port?: number; poolSize?: number; maxDbConnections?: number };
  /**
   * Add the stack's CA to this process's default trusted CAs (default true), so clients in this process (tests,
   * `mds dev`) verify connection strings that carry only `sslmode=require`, which the pg driver treats as verify-full.
   */
  trustCa?: boolean;
  service?: Partial<
    Omit<
      StartServiceOptions,
      "controlUrl" | "regions" | "encryptionKey" | "backupDir" | "host" | "port" | "baseUrl" | "logger"
    >
  >;
};

export type EmbeddedService = RunningService & {
  token: string;
  controlUrl: string;
  postgres: RunningPostgres;
  /** The pooled endpoint's PgBouncer (absent with `pooler: false`). */
  pgbouncer?: RunningPgBouncer;
  /** Every server of the stack, the first being `postgres` and `pgbouncer` above. */
  servers: EmbeddedServerStack[];
  /** PEM of the CA that signed the certificates of PostgreSQL and PgBouncer, and its file (also in service.json). */
  caCert: string;
  caFile: string;
  dir: string;
};

/** Adds `caCert` to the CAs this process trusts by default (once per certificate). */
function trustInProcess(caCert: string): void {
  const current = tls.getCACertificates("default");
  if (!current.some((c) => c.trim() === caCert.trim())) tls.setDefaultCACertificates([...current, caCert]);
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (!rowCount) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
}

/**
 * Another live service on DIR keeps it: starting a second one would take its PostgreSQL away. A service that died
 * (kill -9) leaves its PostgreSQL running; that one startPostgres({ takeOver }) replaces.
 */
async function refuseIfServiceRuns(dir: string): Promise<void> {
  let url: unknown;
  try {
    url = (JSON.parse(await readFile(path.join(dir, "service.json"), "utf8")) as { url?: unknown }).url;
  } catch {
    return;
  }
  if (typeof url !== "string") return;
  const alive = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  );
  if (alive) throw new Error(`another mds service is running on ${dir} (${url}); stop it first`);
}

/** The key that encrypts stored creation responses: generated once into DIR/secret.key (0600). */
async function ensureKey(file: string): Promise<Buffer> {
  try {
    return parseKey(await readFile(file, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    const key = randomSecret(32);
    await writeFile(file, key + "\n", { mode: 0o600 });
    return parseKey(key);
  }
}

/** Reuses the token of DIR/service.json while it is valid, so clients keep working across restarts. */
async function ensureDefaultToken(controlUrl: string, file: string): Promise<string> {
  const pool = createPool(controlUrl, 2);
  try {
    await migrate(pool);
    try {
      const previous = JSON.parse(await readFile(file, "utf8")) as { token?: unknown };
      if (typeof previous.token === "string") {
        const principal = await findPrincipal(pool, previous.token);
        if (principal?.workspaceName === "default") return previous.token;
      }
    } catch {
      // no previous file, or unreadable: mint a new token
    }
    return (await createServiceToken(pool, { workspace: "default", name: "embedded" })).token;
  } finally {
    await pool.end();
  }
}

/**
 * `mds service --embedded DIR`: a private PostgreSQL under DIR/postgres for control data and all six regions,
 * backups under DIR/backups, and DIR/service.json = { url, token } once listening. Data survives restarts.
 */
export async function startEmbeddedService(options: EmbeddedServiceOptions): Promise<EmbeddedService> {
  const dir = path.resolve(options.dir);
  await mkdir(dir, { recursive: true });
  await refuseIfServiceRuns(dir);
  const wanted = options.servers ?? [{ name: defaultServerName }];
  // Checked before any directory is made of a name.
  if (wanted.length === 0) throw new Error("embedded service: servers must name at least one server");
  for (const [i, { name }] of wanted.entries()) {
    const checked = ServerName.safeParse(name);
    if (!checked.success)
      throw new Error(
        `embedded service: servers.${i}.name ${JSON.stringify(name)}: ${checked.error.issues[0]!.message}`,
      );
    if (wanted.findIndex((s) => s.name === name) < i)
      throw new Error(`embedded service: server name ${JSON.stringify(name)} is used twice`);
  }
  const stackOptions: ServerStackOptions = {
    postgresPort: options.postgresPort,
    postgresSettings: options.postgresSettings,
    postgresTemplate: options.postgresTemplate,
    logger: options.logger,
    pooler: (options.pooler ?? true) === false ? false : typeof options.pooler === "object" ? options.pooler : {},
  };
  const stacks: EmbeddedServerStack[] = [];
  // Every server is stopped even when another's stop fails: a server left running outlives the process.
  const stopStacks = async () => {
    const failures: unknown[] = [];
    for (const st of [...stacks].reverse())
      for (const stop of [() => st.pgbouncer?.stop(), () => st.postgres.stop()])
        await Promise.resolve()
          .then(stop)
          .catch((err: unknown) => failures.push(err));
    if (failures.length > 0) throw new AggregateError(failures, "embedded service: could not stop every server");
  };
  try {
    for (const [i, server] of wanted.entries()) {
      const home = serverDir(dir, server, i);
      if (i > 0) await shareCa(stacks[0]!.postgres, home);
      stacks.push({ server, postgres: await startServerPostgres(home, server.name, stackOptions, i === 0) });
    }
    const postgres = stacks[0]!.postgres;
    const serverTls = postgres.tls!;
    if (options.trustCa ?? true) trustInProcess(serverTls.caCert);
    await ensureDatabase(postgres.url, controlDatabase);
    const controlUrl = withDatabase(postgres.url, controlDatabase);
    const encryptionKey = await ensureKey(path.join(dir, "secret.key"));
    const serviceFile = path.join(dir, "service.json");
    const token = await ensureDefaultToken(controlUrl, serviceFile);
    for (const [i, st] of stacks.entries()) {
      const bouncer = await startServerPgBouncer(
        serverDir(dir, st.server, i),
        st.server.name,
        st.postgres,
        stackOptions,
        i === 0,
      );
      if (bouncer) st.pgbouncer = bouncer;
    }
    const pgbouncer = stacks[0]!.pgbouncer;
    const regions = Object.fromEntries(
      regionIds.map((r) => [r, embeddedRegion(stacks, serverTls, options.regionSettings ?? {})]),
    );
    const service = await startService({
      ...options.service,
      controlUrl,
      regions,
      encryptionKey,
      backupDir: path.join(dir, "backups"),
      bindir: postgres.bindir,
      ...(options.host !== undefined ? { host: options.host } : {}),
      ...(options.port !== undefined ? { port: options.port } : {}),
      ...(options.baseUrl !== undefined ? { baseUrl: options.baseUrl } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    // For `mds token --embedded DIR` while the service runs: where the control database is (holds a password: 0600).
    await writeFile(path.join(dir, "control.json"), JSON.stringify({ controlUrl }) + "\n", { mode: 0o600 });
    const tmp = `${serviceFile}.tmp`;
    await writeFile(
      tmp,
      JSON.stringify({ url: service.url, token, caFile: serverTls.caFile, caCert: serverTls.caCert }, null, 2) + "\n",
      { mode: 0o600 },
    );
    await chmod(tmp, 0o600);
    await rename(tmp, serviceFile);
    return {
      ...service,
      token,
      controlUrl,
      postgres,
      ...(pgbouncer ? { pgbouncer } : {}),
      servers: stacks,
      caCert: serverTls.caCert,
      caFile: serverTls.caFile,
      dir,
      async stop() {
        try {
          await service.stop();
        } finally {
          await stopStacks();
        }
      },
    };
  } catch (err) {
    // The start's own error is the one to report; the servers are stopped all the same.
    await stopStacks().catch(() => {});
    throw err;
  }
}

/**
 * Every region is this stack's servers: TLS on, clients on this machine verify them through the CA file, each
 * server's pooled endpoint its own PgBouncer. `settings` (the one-server shape) splits into the region's own keys
 * and those of each server.
 */
function embeddedRegion(stacks: EmbeddedServerStack[], serverTls: ServerTls, settings: RegionSettings): RegionInput {
  const {
    lockTimeoutMs,
    loginConnectionLimit,
    databaseConnectionLimit,
    idleInTransactionTimeoutMs,
    workspaceConnectionLimit,
    ...serverSettings
  } = settings;
  const regionLevel = {
    lockTimeoutMs,
    loginConnectionLimit,
    databaseConnectionLimit,
    idleInTransactionTimeoutMs,
    workspaceConnectionLimit,
  };
  const servers = stacks.map(({ server, postgres, pgbouncer }) => ({
    name: server.name,
    ...(server.maxDatabases !== undefined ? { maxDatabases: server.maxDatabases } : {}),
    ...(server.draining !== undefined ? { draining: server.draining } : {}),
    sslmode: "require" as const,
    caCert: serverTls.caCert,
    sslrootcert: serverTls.caFile,
    ...(pgbouncer
      ? { pooler: { host: pgbouncer.host, port: pgbouncer.port, pgbouncer: !pgbouncer.preparedStatements } }
      : {}),
    ...serverSettings,
    // The service's own sessions and its pg_dump/pg_restore stay on loopback: no TLS handshake for them (libpq's
    // default `prefer` would now negotiate one for every job).
    adminUrl: `${postgres.url}?sslmode=disable`,
  }));
  return {
    ...(Object.fromEntries(Object.entries(regionLevel).filter(([, v]) => v !== undefined)) as typeof regionLevel),
    servers,
  };
}
