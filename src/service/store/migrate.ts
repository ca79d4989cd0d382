import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { inTransaction, withClient } from "./pool.ts";

const migrationsDir = path.join(import.meta.dirname, "migrations");
// Any fixed number: serialises migrations of replicas that start at the same time.
const migrationLock = 7_221_001;

/** Applies the plain SQL files of migrations/ in name order, each once, each in its own transaction. */
export async function migrate(pool: pg.Pool): Promise<string[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith(".sql")).sort();
  const applied: string[] = [];
  // One session for all of it: the advisory lock is the session's, held across the migrations' transactions.
  await withClient(pool, async (client) => {
    await client.query("SELECT pg_advisory_lock($1)", [migrationLock]);
    try {
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
      );
      const { rows } = await client.query<{ name: string }>("SELECT name FROM schema_migrations");
      const done = new Set(rows.map((r) => r.name));
      for (const file of files) {
        if (done.has(file)) continue;
        const sql = await readFile(path.join(migrationsDir, file), "utf8");
        try {
          await inTransaction(client, async () => {
            await client.query(sql);
            await client.query("INSERT INTO schema_migrations (name) VALUES ($1)", [file]);
          });
        } catch (err) {
          throw new Error(`cannot apply migration ${file}: ${(err as Error).message}`, { cause: err });
        }
        applied.push(file);
      }
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [migrationLock]).catch(() => {});
    }
  });
  return applied;
}
