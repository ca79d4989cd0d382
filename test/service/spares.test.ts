import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import pino from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startPostgres, type RunningPostgres } from "../../src/postgres/index.ts";
import { startSpareFiller } from "../../src/service/placement/spares.ts";
import { createPool } from "../../src/service/store/pool.ts";
import { eventually } from "../support/eventually.ts";

// The spare filler yields to the API: while jobs keep being enqueued (a burst of creates) it makes no spare database,
// so no CREATE DATABASE runs beside a create; once the API is quiet it refills the pool to its target, and no further.

let dir: string;
let postgres: RunningPostgres;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-spares-"));
  postgres = await startPostgres({ dir: path.join(dir, "pg"), settings: { fsync: "off" } });
});
afterAll(async () => {
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const spares = async (pool: pg.Pool) =>
  (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'"))
    .rows[0]!.n;
type FillerOptions = Omit<Parameters<typeof startSpareFiller>[0], "pools" | "logger">;
type Filler = ReturnType<typeof startSpareFiller>;

/** Runs `fn` with one filler per replica (`options`) on one server, then stops them and drops their spares. */
async function withFillers(
  options: FillerOptions[],
  fn: (pool: pg.Pool, fillers: Filler[]) => Promise<void>,
): Promise<void> {
  const pool = createPool(postgres.url, 4);
  const fillers = options.map((o) => startSpareFiller({ pools: [pool], logger: pino({ level: "silent" }), ...o }));
  try {
    await fn(pool, fillers);
  } finally {
    for (const filler of fillers) await filler.stop();
    const { rows } = await pool.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'mds_spare_%'",
    );
    for (const { datname } of rows) await pool.query(`DROP DATABASE "${datname}"`);
    await pool.end();
  }
}

it("makes no spare while work keeps arriving or a job runs, then fills the pool to its target once quiet", async () => {
  let jobRunning = false;
  await withFillers([{ target: 3, intervalMs: 100, quietMs: 300, busy: () => jobRunning }], async (pool, [filler]) => {
    // A burst: a job enqueued every 50 ms for 1.5 s.
    for (let t = 0; t < 1500; t += 50) {
      filler!.wake();
      await sleep(50);
    }
    expect(await spares(pool)).toBe(0);
    // Then one long job (a restore) runs for 1.5 s.
    jobRunning = true;
    await sleep(1500);
    expect(await spares(pool)).toBe(0);
    jobRunning = false;
    await eventually(async () => expect(await spares(pool)).toBe(3), {
      timeoutMs: 20_000,
      what: "three spare databases",
    });
    // Spares are the superuser's alone: PUBLIC may not connect to them, and from their creation on no one but a
    // superuser can (CONNECTION LIMIT 0), so not even a crash before the REVOKE leaves one open.
    const { rows } = await pool.query<{ ok: boolean }>(
      "SELECT bool_and(NOT has_database_privilege('public', datname, 'CONNECT') AND datconnlimit = 0) AS ok FROM pg_database WHERE datname LIKE 'mds_spare_%'",
    );
    expect(rows[0]!.ok).toBe(true);
    await sleep(500);
    expect(await spares(pool)).toBe(3);
  });
});

it("still fills a server that is never quiet, once it has yielded for maxYieldMs", async () => {
  await withFillers(
    [{ target: 2, intervalMs: 100, quietMs: 300, maxYieldMs: 1000, busy: () => true }],
    async (pool, [filler]) => {
      const started = Date.now();
      let first = 0;
      while ((await spares(pool)) < 2 && Date.now() - started < 20_000) {
        filler!.wake();
        if (!first && (await spares(pool)) > 0) first = Date.now() - started;
        await sleep(50);
      }
      expect(await spares(pool)).toBe(2);
      expect(first).toBeGreaterThanOrEqual(900);
    },
  );
});

it("two replicas filling one server stop at the target together (at most one over)", async () => {
  const replica = { target: 3, intervalMs: 100, quietMs: 50 };
  await withFillers([replica, replica], async (pool) => {
    await eventually(async () => expect(await spares(pool)).toBeGreaterThanOrEqual(3), {
      timeoutMs: 20_000,
      what: "three spare databases",
    });
    await sleep(1000);
    // Each counts before each copy: two copies may start from one count (one over the target), never a pool each.
    expect(await spares(pool)).toBeLessThanOrEqual(4);
  });
});
