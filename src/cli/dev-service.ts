import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import type { Logger } from "pino";
import { regionIds, type Region } from "../contract/index.ts";
import { startPostgres, type RunningPostgres } from "../postgres/index.ts";
import { startService, type RunningService } from "../service/index.ts";
import { parseKey, randomSecret } from "../service/crypto.ts";
import { createServiceToken, findPrincipal } from "../service/tokens.ts";
import { migrate } from "../service/store/migrate.ts";
import { createPool } from "../service/store/pool.ts";

// The service of `mds dev` with its private PostgreSQL, laid out like `mds service --embedded` (postgres/,
// backups/, secret.key, service.json) but on fixed ports: connection strings in Secrets name PostgreSQL's port,
// so it must not change across restarts. (startEmbeddedService picks a free PostgreSQL port on every start.)

export const controlDatabase = "mds_control";
export const devWorkspace = "default";

export interface DevService {
  url: string;
  token: string;
  postgres: RunningPostgres;
  stop(): Promise<void>;
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

// The same token across restarts, so .mds/env and the credentials Secret stay valid.
async function ensureToken(controlUrl: string, file: string): Promise<string> {
  const pool = createPool(controlUrl, 2);
  try {
    await migrate(pool);
    const previous = await readFile(file, "utf8").then((t) => JSON.parse(t) as { token?: unknown }, () => ({ token: undefined }));
    if (typeof previous.token === "string" && (await findPrincipal(pool, previous.token))?.workspaceName === devWorkspace) {
      return previous.token;
    }
    return (await createServiceToken(pool, { workspace: devWorkspace, name: "mds-dev" })).token;
  } finally {
    await pool.end();
  }
}

export async function startDevService(options: { dir: string; port: number; postgresPort: number; logger: Logger }): Promise<DevService> {
  const dir = path.resolve(options.dir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const postgres = await startPostgres({
    dir: path.join(dir, "postgres"),
    port: options.postgresPort,
    logger: options.logger.child({ component: "postgres" }),
  });
  let service: RunningService | undefined;
  try {
    await ensureDatabase(postgres.url, controlDatabase);
    const u = new URL(postgres.url);
    u.pathname = `/${controlDatabase}`;
    const controlUrl = u.toString();
    const token = await ensureToken(controlUrl, path.join(dir, "service.json"));
    const regions = Object.fromEntries(regionIds.map((r) => [r, { adminUrl: postgres.url }])) as Record<Region, { adminUrl: string }>;
    service = await startService({
      controlUrl,
      regions,
      encryptionKey: await ensureKey(path.join(dir, "secret.key")),
      backupDir: path.join(dir, "backups"),
      bindir: postgres.bindir,
      port: options.port,
      logger: options.logger,
    });
    const file = path.join(dir, "service.json");
    await writeFile(`${file}.tmp`, JSON.stringify({ url: service.url, token }, null, 2) + "\n", { mode: 0o600 });
    await rename(`${file}.tmp`, file);
    const running = service;
    return {
      url: running.url,
      token,
      postgres,
      async stop() {
        await running.stop();
        await postgres.stop();
      },
    };
  } catch (err) {
    await service?.stop().catch(() => undefined);
    await postgres.stop();
    throw err;
  }
}
