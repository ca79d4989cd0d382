import { randomBytes } from "node:crypto";
import type pg from "pg";
import type { Logger } from "pino";
import { ident, sparePrefix } from "./provisioner.ts";

/**
 * Keeps `target` empty databases ready on each region server, so that provisioning renames one instead of waiting
 * for CREATE DATABASE (which copies template1 and dominates create latency). Spares belong to the superuser and
 * nobody else can connect to them; provisioning hands them to the new owner.
 */
export function startSpareFiller(input: { pools: pg.Pool[]; target: number; logger: Logger; intervalMs?: number }): { wake(): void; stop(): Promise<void> } {
  let stopped = false;
  let wakeUp: (() => void) | undefined;
  const sleep = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, input.intervalMs ?? 5000);
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      }
      wakeUp = done;
    });
  const fill = async (pool: pg.Pool) => {
    const { rows } = await pool.query<{ n: string }>("SELECT count(*) AS n FROM pg_database WHERE datname LIKE $1", [`${sparePrefix}%`]);
    for (let have = Number(rows[0]!.n); have < input.target && !stopped; have++) {
      const name = `${sparePrefix}${randomBytes(8).toString("hex")}`;
      await pool.query(`CREATE DATABASE ${ident(name)}`);
      await pool.query(`REVOKE ALL ON DATABASE ${ident(name)} FROM PUBLIC`);
    }
  };
  const loop = (async () => {
    if (input.target <= 0) return;
    while (!stopped) {
      for (const pool of input.pools) {
        if (stopped) break;
        await fill(pool).catch((err: Error) => input.logger.warn({ err: { message: err.message } }, "cannot create spare databases"));
      }
      if (!stopped) await sleep();
    }
  })();
  return {
    wake: () => wakeUp?.(),
    async stop() {
      stopped = true;
      wakeUp?.();
      await loop;
    },
  };
}
