import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { Region } from "../contract/index.ts";
import { describeIssues, RegionConfig } from "../service/config/config.ts";
import { parseKey } from "../service/shared/crypto.ts";
import { createServiceLogger, startEmbeddedService, startService } from "../service/index.ts";

export const serviceUsage = `usage: mds service (--embedded DIR | --database-url URL --regions FILE --backup-dir DIR) [options]

Runs the Managed Database Service API. Every option but --embedded is also an environment variable; the flag wins.

  --embedded DIR            everything on this machine: a private PostgreSQL (TLS, PgBouncer) under DIR for control
                            data and all six regions, backups in DIR/backups, the key in DIR/secret.key; once listening
                            it writes DIR/service.json = { url, token, caFile, caCert } (0600). For development and tests;
                            the same DIR keeps the data and the token across restarts
  --database-url URL        control database, migrated at start (env MDS_DATABASE_URL); required without --embedded
  --regions FILE            region servers, JSON or YAML (env MDS_REGIONS_FILE, or MDS_REGIONS as inline JSON):
                            { "<region>": { adminUrl, host?, port?, sslmode?, caCert?, pooler?, accelerate? } }, or several
                            servers: { "<region>": { servers: [{ name, adminUrl, …, maxDatabases?, draining? }] } };
                            a region left out answers 422 region_unavailable. Guide: docs/service.md
  --encryption-key-file F   32-byte key (hex or base64) that encrypts backups and stored creation responses (env
                            MDS_ENCRYPTION_KEY); required without --embedded. Changing it makes existing backups unreadable
  --backup-dir DIR          where the encrypted pg_dump archives go (env MDS_BACKUP_DIR); required without --embedded
  --host HOST               listen address (env MDS_HOST, default 127.0.0.1); 0.0.0.0 to serve other machines
  --port PORT               listen port (env MDS_PORT, default 8080); 0 picks a free one
  --base-url URL            the URL clients reach, prefix of every resource url (env MDS_BASE_URL, default
                            http://HOST:PORT); set it behind a proxy or load balancer
  --log-level LEVEL         trace|debug|info|warn|error|fatal|silent (env MDS_LOG_LEVEL, default info); debug logs
                            one line per request
  --backup-retention-days N days backups are kept before the maintenance pass deletes them (env
                            MDS_BACKUP_RETENTION_DAYS, default 7)
  --spare-databases N       empty databases kept ready per region server so a burst of creates skips CREATE DATABASE
                            (env MDS_SPARE_DATABASES, default 64, ~470 MB per server; 0 for none); size it for the
                            largest burst of creates you expect
`;

const Port = z.coerce.number().int().min(0).max(65535);
const LogLevel = z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);

const CliConfig = z.object({
  embedded: z.string().min(1).optional(),
  databaseUrl: z.string().min(1).optional(),
  regionsFile: z.string().min(1).optional(),
  regionsJson: z.string().min(1).optional(),
  encryptionKey: z.string().min(1).optional(),
  encryptionKeyFile: z.string().min(1).optional(),
  backupDir: z.string().min(1).optional(),
  host: z.string().min(1).default("127.0.0.1"),
  port: Port.default(8080),
  baseUrl: z.url().optional(),
  logLevel: LogLevel.default("info"),
  backupRetentionDays: z.coerce.number().int().min(1).optional(),
  spareDatabases: z.coerce.number().int().min(0).max(1000).optional(),
});

function parseCli(argv: string[], env: NodeJS.ProcessEnv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      embedded: { type: "string" },
      "database-url": { type: "string" },
      regions: { type: "string" },
      "encryption-key-file": { type: "string" },
      "backup-dir": { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      "base-url": { type: "string" },
      "log-level": { type: "string" },
      "backup-retention-days": { type: "string" },
      "spare-databases": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help" as const;
  const pick = (flag: string | undefined, name: string) => flag ?? env[name] ?? undefined;
  const raw = Object.fromEntries(
    Object.entries({
      embedded: values.embedded,
      databaseUrl: pick(values["database-url"], "MDS_DATABASE_URL"),
      regionsFile: pick(values.regions, "MDS_REGIONS_FILE"),
      regionsJson: env.MDS_REGIONS,
      encryptionKey: env.MDS_ENCRYPTION_KEY,
      encryptionKeyFile: values["encryption-key-file"],
      backupDir: pick(values["backup-dir"], "MDS_BACKUP_DIR"),
      host: pick(values.host, "MDS_HOST"),
      port: pick(values.port, "MDS_PORT"),
      baseUrl: pick(values["base-url"], "MDS_BASE_URL"),
      logLevel: pick(values["log-level"], "MDS_LOG_LEVEL"),
      backupRetentionDays: pick(values["backup-retention-days"], "MDS_BACKUP_RETENTION_DAYS"),
      spareDatabases: pick(values["spare-databases"], "MDS_SPARE_DATABASES"),
    }).filter(([, v]) => v !== undefined && v !== ""),
  );
  const result = CliConfig.safeParse(raw);
  if (!result.success) {
    // Issue paths are option names; values are not echoed (a URL could hold a password).
    throw new Error(
      `invalid options: ${result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  return result.data;
}

async function loadRegions(
  file: string | undefined,
  json: string | undefined,
): Promise<Partial<Record<Region, RegionConfig>>> {
  const text = file ? await readFile(file, "utf8") : json;
  if (!text) throw new Error("no regions: pass --regions FILE (or MDS_REGIONS), or use --embedded DIR");
  let raw: unknown;
  try {
    raw = file && /\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new Error(
      `invalid regions: ${file ? `${file} is not valid ${/\.ya?ml$/i.test(file) ? "YAML" : "JSON"}` : "MDS_REGIONS is not valid JSON"}: ${(err as Error).message.split("\n")[0]}`,
      { cause: err },
    );
  }
  const parsed = z.partialRecord(Region, RegionConfig).safeParse(raw);
  if (!parsed.success) throw new Error(`invalid regions: ${describeIssues(parsed.error.issues, "")}`);
  return parsed.data;
}

function waitForSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (signal: string) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(signal);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

export async function runService(argv: string[]): Promise<number> {
  let cli: ReturnType<typeof parseCli>;
  try {
    cli = parseCli(argv, process.env);
  } catch (err) {
    console.error(`mds service: ${(err as Error).message}\n\n${serviceUsage}`);
    return 2;
  }
  if (cli === "help") {
    console.log(serviceUsage);
    return 0;
  }
  const logger = createServiceLogger(cli.logLevel);
  const common = { host: cli.host, port: cli.port, ...(cli.baseUrl ? { baseUrl: cli.baseUrl } : {}), logger };
  const tuning = {
    ...(cli.backupRetentionDays ? { backupRetentionDays: cli.backupRetentionDays } : {}),
    ...(cli.spareDatabases !== undefined ? { spareDatabases: cli.spareDatabases } : {}),
  };
  let stop: () => Promise<void>;
  if (cli.embedded) {
    const service = await startEmbeddedService({ dir: cli.embedded, ...common, service: tuning });
    console.log(
      `mds service listening on ${service.url} (embedded PostgreSQL in ${service.dir}; url and token in ${service.dir}/service.json)`,
    );
    stop = () => service.stop();
  } else {
    if (!cli.databaseUrl)
      throw new Error("no control database: pass --database-url (or MDS_DATABASE_URL), or use --embedded DIR");
    const keyText = cli.encryptionKeyFile ? await readFile(cli.encryptionKeyFile, "utf8") : cli.encryptionKey;
    if (!keyText)
      throw new Error(
        "no encryption key: pass --encryption-key-file or MDS_ENCRYPTION_KEY (32 bytes, hex or base64; e.g. `openssl rand -hex 32`)",
      );
    if (!cli.backupDir) throw new Error("no backup directory: pass --backup-dir or MDS_BACKUP_DIR");
    const service = await startService({
      ...common,
      controlUrl: cli.databaseUrl,
      regions: await loadRegions(cli.regionsFile, cli.regionsJson),
      encryptionKey: parseKey(keyText),
      backupDir: cli.backupDir,
      ...tuning,
    });
    console.log(`mds service listening on ${service.url}`);
    stop = () => service.stop();
  }
  const signal = await waitForSignal();
  logger.info({ signal }, "stopping");
  await stop();
  return 0;
}
