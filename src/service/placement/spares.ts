import { randomBytes } from "node:crypto";
import type pg from "pg";
import type { Logger } from "pino";
import { ident, sparePrefix } from "./provisioner.ts";

/**
 * Keeps `target` empty databases ready on each region server, so that provisioning renames one (~25 ms) instead of
 * waiting for CREATE DATABASE (which copies template1: ~150 ms of one core here, mostly creating ~300 files). Spares
 * belong to the superuser and nobody else can connect to them; provisioning hands them to the new owner.
 *
 * The filler yields: it makes a spare only once no job has been enqueued for `quietMs` and none of this replica's
 * jobs runs (another replica's work does not hold it back). A CREATE DATABASE beside a create's own work made that
 * create 2–5× slower, and beside a create's own CREATE DATABASE (no spare left) up to 0.7 s (bench/history/2026-11-24-service-data-plane-tls-create-tail.md#the-create-tail-p99-at-concurrency-1). So a burst of creates runs on the spares alone, and the pool is refilled in the pause after it: size
 * `target` for the largest burst you expect.
 */
export function startSpareFiller(input: {
  pools: pg.Pool[];
  target: number;
  logger: Logger;
  intervalMs?: number;
  quietMs?: number;
  maxYieldMs?: number;
  /** True while jobs run here (a restore, a backup): they too should not share the server with a template copy. */
  busy?: () => boolean;
}): { wake(): void; stop(): Promise<void> } {
  const quietMs = input.quietMs ?? 250;
  let stopped = false;
  let lastActivity = 0;
  let wakeUp: (() => void) | undefined;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      }
      wakeUp = done;
    });
  // Until no job has been enqueued for quietMs (a wake during the wait restarts it) and none of this replica's jobs
  // runs, or the filler stops; but never longer than maxYieldMs, so a server that is never idle (back-to-back backups
  // of a large fleet, a steady stream of creates) still gets a spare every maxYieldMs.
  const untilQuiet = async () => {
    const deadline = Date.now() + (input.maxYieldMs ?? 10_000);
    const left = () =>
      Math.min(deadline - Date.now(), Math.max(lastActivity + quietMs - Date.now(), input.busy?.() ? quietMs : 0));
    for (let wait = quietMs; wait > 0 && !stopped; wait = left()) await sleep(wait);
  };
  const count = async (pool: pg.Pool) =>
    Number(
      (
        await pool.query<{ n: string }>("SELECT count(*) AS n FROM pg_database WHERE datname LIKE $1", [
          `${sparePrefix}%`,
        ])
      ).rows[0]!.n,
    );
  const fill = async (pool: pg.Pool) => {
    // Counted again before each copy: another replica's filler may be filling the same server.
    while (!stopped && (await count(pool)) < input.target) {
      const name = `${sparePrefix}${randomBytes(8).toString("hex")}`;
      // CONNECTION LIMIT 0 from the first moment (superusers are exempt; a claim sets the tenant's limit): a crash
      // before the REVOKE, or a tenant quick enough, must not be able to sit in a spare and make its rename fail.
      await pool.query(`CREATE DATABASE ${ident(name)} CONNECTION LIMIT 0`);
      await pool.query(`REVOKE ALL ON DATABASE ${ident(name)} FROM PUBLIC`);
      await untilQuiet();
    }
  };
  const loop = (async () => {
    if (input.target <= 0) return;
    while (!stopped) {
      // After a wake, count once the creates of the burst have taken their spares.
      await untilQuiet();
      for (const pool of input.pools) {
        if (stopped) break;
        await fill(pool).catch((err: Error) =>
          input.logger.warn({ err: { message: err.message } }, "cannot create spare databases"),
        );
      }
      if (!stopped) await sleep(input.intervalMs ?? 5000);
    }
  })();
  return {
    // Work was enqueued: a create may be about to take a spare. Count again once the API is quiet.
    wake: () => {
      lastActivity = Date.now();
      wakeUp?.();
    },
    async stop() {
      stopped = true;
      wakeUp?.();
      await loop;
    },
  };
}
