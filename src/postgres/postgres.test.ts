import { execFileSync, spawnSync } from "node:child_process";
import { chmod, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { findPostgresBinaries, PostgresNotFoundError, startPostgres } from "./index.ts";

async function query(url: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

describe("postgres", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("finds binaries, highest version first", async () => {
    const bin = await findPostgresBinaries();
    expect(bin.version).toBeGreaterThanOrEqual(13);
    expect(bin.bindir).toMatch(/bin$/);
  });

  it("names what is missing and how to install it", async () => {
    const err = await findPostgresBinaries({
      searchPath: "/nonexistent",
      pgConfig: "/nonexistent/pg_config",
      libRoot: "/nonexistent",
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresNotFoundError);
    expect((err as Error).message).toMatch(/initdb, postgres, pg_dump, pg_restore.*apt-get install postgresql/);
  });

  it("starts, keeps data across restarts, and tolerates a stale postmaster.pid", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "mds-pg-"));
    dirs.push(dir);
    const first = await startPostgres({ dir, port: 0, settings: { fsync: "off" } });
    await query(first.url, "create table kept (v int); insert into kept values (42)");
    await first.stop();
    await first.stop(); // idempotent
    // A killed server leaves its pid file; a dead pid must not block the next start.
    await writeFile(path.join(dir, "data", "postmaster.pid"), "999999\n");
    const second = await startPostgres({ dir, settings: { fsync: "off" } });
    const { rows } = await query(second.url, "select v from kept");
    expect(rows).toEqual([{ v: 42 }]);
    await second.stop();
  });
});

describe("template clusters", () => {
  it("copies a cached cluster instead of running initdb, and the copy is independent", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "mds-tpl-"));
    const { templateCluster } = await import("./index.ts");
    const template = await templateCluster({ root });
    expect(await templateCluster({ root })).toBe(template);
    const a = await mkdtemp(path.join(tmpdir(), "mds-pg-a-"));
    const b = await mkdtemp(path.join(tmpdir(), "mds-pg-b-"));
    const first = await startPostgres({ dir: a, template, settings: { fsync: "off" } });
    const second = await startPostgres({ dir: b, template, settings: { fsync: "off" } });
    try {
      await query(first.url, "create table only_in_a (v int)");
      const { rows } = await query(second.url, "select to_regclass('only_in_a') as t");
      expect(rows).toEqual([{ t: null }]);
    } finally {
      await first.stop();
      await second.stop();
      for (const d of [root, a, b]) await rm(d, { recursive: true, force: true });
    }
  });
});

// As root the server runs as the `postgres` OS user, which must pass through the directories above its own. Starting
// it used to widen a 0700 parent to 0711, opening it to every OS user; now only that user gets through (an ACL entry).
describe.runIf(process.getuid?.() === 0)("directories above the data directory, as root", () => {
  it("stay closed to other users: a 0700 parent keeps its mode and only the postgres user passes", async () => {
    const { templateCluster } = await import("./index.ts");
    const parent = await mkdtemp(path.join(tmpdir(), "mds-private-"));
    await chmod(parent, 0o700);
    const server = await startPostgres({
      dir: path.join(parent, "pg"),
      template: await templateCluster(),
      settings: { fsync: "off" },
    });
    try {
      expect((await query(server.url, "select 1 as one")).rows).toEqual([{ one: 1 }]);
      expect((await stat(parent)).mode & 0o007).toBe(0);
      const passes = (uid: number) => spawnSync("test", ["-x", parent], { uid, gid: uid }).status === 0;
      expect(passes(Number(execFileSync("id", ["-u", "postgres"]).toString().trim()))).toBe(true);
      expect(passes(65534)).toBe(false); // nobody
    } finally {
      await server.stop();
      await rm(parent, { recursive: true, force: true });
    }
  });
});
