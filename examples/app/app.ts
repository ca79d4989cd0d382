// A tiny app that uses a connection Secret the way a pod does: from files in a mounted Secret volume
// (SECRET_DIR=/etc/orders-db) or from environment variables (envFrom). It connects, writes a row, and
// prints what it sees. It never prints the password or the URL.
//
//   node examples/app/app.ts                     # DATABASE_URL etc. in the environment (envFrom)
//   SECRET_DIR=/tmp/orders-db node examples/app/app.ts   # a mounted Secret volume
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";

function readSecret(): Record<string, string> {
  const dir = process.env.SECRET_DIR;
  if (dir) {
    // A Secret volume holds one file per key (the kubelet adds hidden ..data links; skip them).
    return Object.fromEntries(
      readdirSync(dir)
        .filter((name) => !name.startsWith("."))
        .map((name) => [name, readFileSync(join(dir, name), "utf8")]),
    );
  }
  return Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
}

const secret = readSecret();
const url = secret.DATABASE_URL;
if (!url) {
  console.error("app: no DATABASE_URL: set SECRET_DIR to a mounted Secret, or pass the Secret's keys as environment variables");
  process.exit(1);
}

const client = new pg.Client({ connectionString: url, ssl: false });
try {
  await client.connect();
  await client.query("CREATE TABLE IF NOT EXISTS visits (id serial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())");
  await client.query("INSERT INTO visits DEFAULT VALUES");
  const { rows } = await client.query<{ db: string; who: string; visits: string }>(
    "SELECT current_database() AS db, current_user AS who, (SELECT count(*) FROM visits) AS visits",
  );
  const row = rows[0]!;
  console.log(`connected to database ${row.db} as ${row.who} on ${secret.PGHOST ?? "?"}:${secret.PGPORT ?? "?"}; visits: ${row.visits}`);
} catch (err) {
  console.error(`app: cannot use the database: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  await client.end().catch(() => undefined);
}
