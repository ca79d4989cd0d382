import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startPostgres, type RunningPostgres } from "../../src/postgres/index.ts";
import { startSpareFiller } from "../../src/service/spares.ts";
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

it("makes no spare while work keeps arriving, then fills the pool to its target once quiet", async () => {
  const pool = createPool(postgres.url, 2);
  const spares = async () => (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'")).rows[0]!.n;
  const filler = startSpareFiller({ pools: [pool], target: 3, logger: pino({ level: "silent" }), intervalMs: 100, quietMs: 300 });
  try {
    // A burst: a job enqueued every 50 ms for 1.5 s.
    for (let t = 0; t < 1500; t += 50) {
      filler.wake();
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await spares()).toBe(0);
    await eventually(async () => expect(await spares()).toBe(3), { timeoutMs: 20_000, what: "three spare databases" });
    // Spares are the superuser's alone: PUBLIC may not connect to them.
    const { rows } = await pool.query<{ ok: boolean }>("SELECT bool_and(NOT has_database_privilege('public', datname, 'CONNECT')) AS ok FROM pg_database WHERE datname LIKE 'mds_spare_%'");
    expect(rows[0]!.ok).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    expect(await spares()).toBe(3);
  } finally {
    await filler.stop();
    await pool.end();
  }
});
