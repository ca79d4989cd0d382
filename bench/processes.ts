// What the service benches share: one SQL statement on a connection of its own, and a program run to its end.
import { spawn } from "node:child_process";
import path from "node:path";
import pg from "pg";

/** Runs `text` on a connection opened for it and closed after; returns the rows. */
export async function sql(url: string, text: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as Record<string, unknown>[];
  } finally {
    await c.end();
  }
}

/** Runs `command` with `env` (its output shown); resolves on exit 0. */
export function run(command: string, args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "inherit", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(command)} exit ${code}`)),
    );
  });
}
