import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, completedBackup, settledDatabase, sql, type Json } from "../service/helpers.ts";

// A tenant names its schemas and tables as it likes. The parallel restore plans from `pg_restore --list` output (one
// line per entry) and hands `-L` lists back to pg_restore; a clone pipes its largest tables with `pg_dump -t <pattern>`.
// Names that would break either if they were handed back as text: a newline followed by a forged list line, double
// quotes, `*` and `.` (pattern characters), a 63-byte name, and large tables `x*` and `xy`, each piped in a lane of
// its own: an unescaped `x*` would match `xy` too, and its rows would arrive twice. Restore, copy from a backup and clone must each
// bring back exactly the tenant's rows, table by table.

const names: [schema: string, table: string][] = [
  ["public", "evil\n9999; 0 0 TABLE DATA public evil owner"],
  ["public", 'a"b*c.d'],
  ["public", "*"],
  ["public", "n".repeat(63)],
  ['s"*\n1; 0 0 SCHEMA - x', "t"],
  ["public", "x*"],
  ["public", "xy"],
  // Large too: piped by a pattern holding a quote, a newline, `*` and `.`, in a schema whose name holds them as well.
  ['s"*\n1; 0 0 SCHEMA - x', 'big"\n*.t'],
];
const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;
const large = (i: number) => i >= 5;
const rowsOf = (i: number) => (large(i) ? 1500 : 3 + i);

let service: TestService;
let api: ReturnType<typeof client>;
let project: Json;

async function counts(url: string): Promise<number[]> {
  const out: number[] = [];
  for (const [schema, table] of names) {
    const [row] = await sql<{ n: number }>(url, `SELECT count(*)::int AS n FROM ${ident(schema)}.${ident(table)}`);
    out.push(row!.n);
  }
  return out;
}

describe("table and schema names a tenant writes do not break the parallel restore or the clone", () => {
  beforeAll(async () => {
    // Split from the first byte: every restore and clone is planned in parallel runs.
    service = await startTestService({ service: { restoreSplitMinBytes: 0 } });
    api = client(service, service.token);
    project = (await api("POST", "/v1/projects", { name: "names" })).body.data;
    await settledDatabase(api, project.database.id);
    const url = project.database.connectionString as string;
    await sql(url, `CREATE SCHEMA ${ident(names[4]![0])}`);
    for (const [i, [schema, table]] of names.entries()) {
      const t = `${ident(schema)}.${ident(table)}`;
      await sql(url, `CREATE TABLE ${t} (id int PRIMARY KEY, v text)`);
      await sql(url, `CREATE INDEX ON ${t} (v)`);
      // `x*` and `xy` are large enough (over 1 MiB) for the clone to pipe each by a pattern of its own.
      await sql(url, `INSERT INTO ${t} SELECT g, repeat('v', ${large(i) ? 1000 : 10}) FROM generate_series(1, $1) g`, [
        rowsOf(i),
      ]);
    }
    expect(await counts(url)).toEqual(names.map((_, i) => rowsOf(i)));
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
  });

  const expected = () => names.map((_, i) => rowsOf(i));

  it("POST /v1/databases/{id}/restore brings back every table's rows", async () => {
    const db = project.database;
    const backup = await completedBackup(api, db.id);
    await sql(db.connectionString, `INSERT INTO ${ident("public")}.${ident("xy")} VALUES (100000, 'later')`);
    const res = await api("POST", `/v1/databases/${db.id}/restore`, {
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(res.status).toBe(200);
    const final = await settledDatabase(api, db.id);
    expect(final.status, final.failureReason).toBe("ready");
    expect(await counts(db.connectionString)).toEqual(expected());
  }, 120_000);

  it("cloning the database copies every table once (the large `x*` and `xy` piped, each once)", async () => {
    const res = await api("POST", "/v1/databases", {
      projectId: project.id,
      name: "clone",
      region: "inherit",
      source: { type: "database", databaseId: project.database.id },
    });
    expect(res.status).toBe(201);
    const final = await settledDatabase(api, res.body.data.id);
    expect(final.status, final.failureReason).toBe("ready");
    const url = res.body.data.connections[0].endpoints.direct.connectionString as string;
    expect(await counts(url)).toEqual(expected());
  }, 120_000);
});
