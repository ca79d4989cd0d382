import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "./helpers.ts";

// A restore of an archive past `restoreSplitMinBytes` runs as `pg_restore -j` would, in passes that each read the
// archive through an authenticated pipe (src/service/jobs/restore-plan.ts). Here every archive is past it (0), so
// every restore and clone takes the split path, on a schema with what the passes must order rightly.

let service: TestService;
let api: ReturnType<typeof client>;
let project: Json;

async function settled(id: string): Promise<Json> {
  return eventually(
    async () => {
      const d = (await api("GET", `/v1/databases/${id}`)).body.data;
      if (d.status === "provisioning" || d.status === "recovering") throw new Error(d.status);
      return d;
    },
    { timeoutMs: 60_000 },
  );
}
/** Ready, or the failed job's error as the failure. */
async function ready(id: string): Promise<void> {
  if ((await settled(id)).status === "ready") return;
  const [job] = await sql<{ error: string }>(
    service.controlUrl,
    "SELECT error FROM jobs WHERE target_id = $1 ORDER BY id DESC LIMIT 1",
    [id],
  );
  throw new Error(`database ${id} failed: ${job?.error}`);
}
async function completedBackup(dbId: string): Promise<Json> {
  const created = (await api("POST", `/v1/databases/${dbId}/backups`)).body.data;
  return eventually(
    async () => {
      const found = (await api("GET", `/v1/databases/${dbId}/backups`)).body.data.find(
        (x: Json) => x.id === created.id,
      );
      if (found.status !== "completed") throw new Error(found.status);
      return found;
    },
    { timeoutMs: 60_000 },
  );
}
async function readyDatabase(name: string): Promise<Json> {
  const db = (await api("POST", `/v1/projects/${project.id}/databases`, { name })).body.data;
  await settled(db.id);
  return db;
}

const schema = `
  CREATE TABLE parent (id int PRIMARY KEY, name text NOT NULL UNIQUE);
  CREATE TABLE child (id serial PRIMARY KEY, parent_id int NOT NULL REFERENCES parent (id), v text CHECK (length(v) < 100), touched int NOT NULL DEFAULT 0);
  CREATE INDEX child_parent ON child (parent_id);
  CREATE TABLE events (id int, at date, v text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
  CREATE TABLE events_2024 PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
  CREATE TABLE events_2025 PARTITION OF events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
  CREATE INDEX events_v ON events (v);
  CREATE MATERIALIZED VIEW child_counts AS SELECT parent_id, count(*)::int AS n FROM child GROUP BY parent_id;
  CREATE UNIQUE INDEX child_counts_parent ON child_counts (parent_id);
  CREATE SEQUENCE standalone START 100;
  SELECT setval('standalone', 4242);
  CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.touched := NEW.touched + 1; RETURN NEW; END $$;
  CREATE TRIGGER child_touch BEFORE UPDATE ON child FOR EACH ROW EXECUTE FUNCTION touch();
  COMMENT ON TABLE parent IS 'the parents';
  COMMENT ON INDEX child_parent IS 'children by parent';
  INSERT INTO parent SELECT g, 'p' || g FROM generate_series(1, 50) g;
  INSERT INTO child (parent_id, v) SELECT 1 + g % 50, 'v' || g FROM generate_series(1, 2000) g;
  INSERT INTO events SELECT g, date '2024-06-01' + (g % 400), 'e' || g FROM generate_series(1, 1000) g;
  REFRESH MATERIALIZED VIEW child_counts;
  SELECT lo_from_bytea(424242, 'a large object');
`;

/** What a `\\d` shows of the schema, and the data, as comparable rows. */
async function facts(url: string): Promise<Record<string, unknown>> {
  const q = (text: string) => sql(url, text);
  return {
    relations: await q(
      "SELECT c.relname, c.relkind, c.relispopulated FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1",
    ),
    indexes: await q(
      "SELECT indexrelid::regclass::text AS name, indisvalid, indisprimary, indisunique, pg_get_indexdef(indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1",
    ),
    attached: await q(
      "SELECT inhrelid::regclass::text AS child, inhparent::regclass::text AS parent FROM pg_inherits ORDER BY 1",
    ),
    constraints: await q(
      "SELECT conrelid::regclass::text AS rel, conname, convalidated, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    ),
    triggers: await q(
      "SELECT tgrelid::regclass::text AS rel, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 2",
    ),
    comments: await q(
      "SELECT objoid::regclass::text AS rel, description FROM pg_description WHERE classoid = 'pg_class'::regclass ORDER BY 1",
    ),
    counts: await q(
      "SELECT (SELECT count(*) FROM parent)::int AS parent, (SELECT count(*) FROM child)::int AS child, (SELECT count(*) FROM events_2024)::int AS e2024, (SELECT count(*) FROM events_2025)::int AS e2025, (SELECT sum(n) FROM child_counts)::int AS counted",
    ),
    sequences: await q(
      "SELECT (SELECT last_value FROM standalone)::int AS standalone, (SELECT last_value FROM child_id_seq)::int AS child",
    ),
    largeObjects: await q("SELECT oid::int, convert_from(lo_get(oid), 'UTF8') AS data FROM pg_largeobject_metadata"),
  };
}

// Each restore's timings and what each lane's pg_restore was fed (the job's debug record "restore swapped").
const swapped: { passes: Record<string, number> }[] = [];
const logger = pino(
  { level: "debug" },
  {
    write(line: string) {
      const record = JSON.parse(line) as { msg?: string; passes?: Record<string, number> };
      if (record.msg === "restore swapped") swapped.push({ passes: record.passes ?? {} });
    },
  },
);

beforeAll(async () => {
  service = await startTestService({
    logger,
    service: { restoreSplitMinBytes: 0, restoreJobs: 2, jobMaxAttempts: 1 },
  });
  api = client(service, service.token);
  project = (await api("POST", "/v1/projects", { name: "restore-split", createDatabase: false })).body.data;
});
afterAll(async () => {
  await service?.stop();
});

describe("restores and clones in parallel passes (split path)", () => {
  it("a restore brings back the schema and data exactly, foreign keys, partitions, views and all", async () => {
    const db = await readyDatabase("split");
    await sql(db.connectionString, schema);
    const before = await facts(db.connectionString);
    const backup = await completedBackup(db.id);
    await sql(
      db.connectionString,
      "DELETE FROM child WHERE id > 10; DROP MATERIALIZED VIEW child_counts; DROP TABLE events; SELECT lo_unlink(424242)",
    );
    const restores = swapped.length;
    await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    await ready(db.id);
    expect(await facts(db.connectionString)).toEqual(before);
    // Each lane was fed its own tables' data, not the whole archive (the sealed file: a 32-byte header, then 64 KiB
    // records of 21 bytes more each).
    const { passes } = swapped[restores]!;
    const records = Math.ceil((backup.size - 32) / (65_536 + 21));
    const plaintext = backup.size - 32 - 21 * records;
    expect(passes.lane0Bytes).toBeGreaterThan(0);
    expect(passes.lane1Bytes).toBeGreaterThan(0);
    expect(passes.lane0Bytes).toBeLessThan(plaintext);
    expect(passes.lane1Bytes).toBeLessThan(plaintext);
    // The trigger came back and fires; the foreign key holds.
    expect(await sql(db.connectionString, "UPDATE child SET v = 'x' WHERE id = 1 RETURNING touched")).toEqual([
      { touched: 1 },
    ]);
    await expect(sql(db.connectionString, "INSERT INTO child (parent_id) VALUES (999)")).rejects.toThrow(/foreign key/);
    // Every pass's login is gone.
    expect(await sql(service.postgresUrl, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'mds\\_job\\_%'")).toEqual(
      [],
    );
  });

  it("the dump records each table's data size for the plan; a backup without them (older) restores the same", async () => {
    const db = await readyDatabase("sizes");
    await sql(db.connectionString, schema);
    const before = await facts(db.connectionString);
    const backup = await completedBackup(db.id);
    const [row] = await sql<{ data_bytes: Record<string, number> | null }>(
      service.controlUrl,
      "SELECT data_bytes FROM backups WHERE id = $1",
      [backup.id],
    );
    // One entry per table's data block (parent, child, the two partitions; sequence values and large objects are not
    // measured), by dump id only: the largest is child's data.
    const sizes = Object.entries(row!.data_bytes ?? {});
    expect(sizes.length).toBe(4);
    expect(sizes.every(([id, n]) => /^\d+$/.test(id) && Number.isInteger(n) && n >= 0)).toBe(true);
    expect(Math.max(...sizes.map(([, n]) => n))).toBeGreaterThan(1000);
    for (const recorded of [true, false]) {
      if (!recorded) await sql(service.controlUrl, "UPDATE backups SET data_bytes = NULL WHERE id = $1", [backup.id]);
      await sql(db.connectionString, "DELETE FROM child WHERE id > 10; DROP TABLE events");
      await api("POST", `/v1/databases/${db.id}/restore`, {
        source: { type: "backup", databaseId: db.id, backupId: backup.id },
      });
      await ready(db.id);
      expect(await facts(db.connectionString)).toEqual(before);
    }
  });

  it("a clone copies the same; its large tables are piped from the source, names that are patterns too", async () => {
    const source = await readyDatabase("clone-source");
    await sql(source.connectionString, schema);
    // Past 1 MiB a table gets a lane of its own (pg_dump -t): its name must match it alone, read as no pattern.
    await sql(
      source.connectionString,
      `CREATE SCHEMA "Odd.Schema";
       CREATE TABLE "Odd.Schema"."Weird*Name$" AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 30000) g;
       CREATE TABLE "Odd.Schema"."WeirdXName" (id int);
       INSERT INTO "Odd.Schema"."WeirdXName" VALUES (1);
       CREATE TABLE big (id int PRIMARY KEY, v text);
       INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 30000) g;`,
    );
    const extra = (url: string) =>
      sql(
        url,
        `SELECT (SELECT count(*) FROM "Odd.Schema"."Weird*Name$")::int AS weird, (SELECT count(*) FROM "Odd.Schema"."WeirdXName")::int AS x,
                (SELECT count(*) FROM big)::int AS big, (SELECT sum(id) FROM big)::int AS sum`,
      );
    const created = await api("POST", "/v1/databases", {
      projectId: project.id,
      name: "clone",
      region: "inherit",
      source: { type: "database", databaseId: source.id },
    });
    expect(created.status).toBe(201);
    await ready(created.body.data.id);
    const cloneUrl = created.body.data.connections[0].endpoints.direct.connectionString;
    expect(await facts(cloneUrl)).toEqual(await facts(source.connectionString));
    expect(await extra(cloneUrl)).toEqual([{ weird: 30000, x: 1, big: 30000, sum: 450015000 }]);
    expect(await extra(cloneUrl)).toEqual(await extra(source.connectionString));
  });

  it("one failing pass fails the whole restore, kills the others, and the old data stays", async () => {
    const db = await readyDatabase("failing");
    await sql(db.connectionString, schema);
    // An index on a function that reads a table by an unqualified name: pg_restore runs it with an empty
    // search_path, so building the index fails, in one of the parallel index passes.
    await sql(
      db.connectionString,
      `CREATE TABLE gate (n int); INSERT INTO gate VALUES (1);
       CREATE FUNCTION gated(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 + (SELECT max(n) FROM gate)';
       CREATE INDEX child_gated ON child (gated(id));`,
    );
    const backup = await completedBackup(db.id);
    await sql(db.connectionString, "DELETE FROM child WHERE id > 10");
    const before = await facts(db.connectionString);
    await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    const final = await settled(db.id);
    expect(final.status).toBe("failure");
    const [job] = await sql<{ error: string }>(
      service.controlUrl,
      "SELECT error FROM jobs WHERE target_id = $1 AND kind = 'restore'",
      [db.id],
    );
    expect(job!.error).toMatch(/relation "gate" does not exist/);
    expect(await facts(db.connectionString)).toEqual(before);
    // No scratch database, no pg_restore session and no login of the job is left.
    await eventually(async () => {
      expect(await sql(service.postgresUrl, "SELECT datname FROM pg_database WHERE datname ~ '_[ro][0-9]+$'")).toEqual(
        [],
      );
      expect(
        await sql(service.postgresUrl, "SELECT usename FROM pg_stat_activity WHERE usename LIKE 'mds\\_job\\_%'"),
      ).toEqual([]);
      expect(await sql(service.postgresUrl, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'mds\\_job\\_%'")).toEqual(
        [],
      );
    });
  });
});
