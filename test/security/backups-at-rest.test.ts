import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findPostgresBinaries } from "../../src/postgres/index.ts";
import { openArchive, recordPlaintextLength, sealArchive } from "../../src/service/jobs/backup-archive.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, withDatabase, type Json } from "../service/helpers.ts";

// Someone who can read (or write) the backup directory must learn nothing and change nothing: archives are sealed in
// a chunked AEAD stream under a key derived from the service's key, directories are 0700 and files 0600, and a
// changed, truncated or swapped archive never gets restored.

const run = promisify(execFile);

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of source) parts.push(p);
  return Buffer.concat(parts);
}
async function* chunks(...parts: Buffer[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield p;
}
const open = (sealed: Buffer, key: Buffer, context: string) =>
  collect(openArchive(chunks(sealed), key, context, { allowPlain: false }));

/** Offsets of the records of a sealed archive: [start, end) of each. */
function records(sealed: Buffer): [number, number][] {
  const out: [number, number][] = [];
  for (let at = 32; at < sealed.length;) {
    const end = at + 5 + sealed.readUInt32BE(at + 1) + 16;
    out.push([at, end]);
    at = end;
  }
  return out;
}

describe("archive format", () => {
  const key = randomBytes(32);
  const data = randomBytes(recordPlaintextLength * 3 + 123);

  it("round-trips any size, in any chunking", async () => {
    for (const size of [0, 1, recordPlaintextLength, recordPlaintextLength + 1, data.length]) {
      const cut = Math.min(size, 7);
      const sealed = await collect(sealArchive(chunks(data.subarray(0, cut), data.subarray(cut, size)), key, "bkp_1"));
      expect((await open(sealed, key, "bkp_1")).equals(data.subarray(0, size))).toBe(true);
    }
  });

  it("opens an archive read in any chunking (a record across chunks, many records in one)", async () => {
    const sealed = await collect(sealArchive(chunks(data), key, "bkp_1"));
    async function* cut(size: number) {
      for (let at = 0; at < sealed.length; at += size) yield sealed.subarray(at, at + size);
    }
    for (const size of [1, 5, 7, 1000, recordPlaintextLength + 21, recordPlaintextLength + 22, 1024 * 1024]) {
      const opened = await collect(openArchive(cut(size), key, "bkp_1", { allowPlain: false }));
      expect(opened.equals(data), `chunks of ${size}`).toBe(true);
    }
  });

  it("refuses a wrong key or another backup's context, changed bytes, dropped, reordered or extra records", async () => {
    const sealed = await collect(sealArchive(chunks(data), key, "bkp_1"));
    const rs = records(sealed);
    expect(rs).toHaveLength(4);
    const header = sealed.subarray(0, 32);
    const rec = (i: number) => sealed.subarray(rs[i]![0], rs[i]![1]);
    const flipped = Buffer.from(sealed);
    flipped[rs[1]![0] + 100]! ^= 1;
    const attempts: [string, Promise<Buffer>][] = [
      ["wrong key", open(sealed, randomBytes(32), "bkp_1")],
      ["another backup", open(sealed, key, "bkp_2")],
      ["flipped bit", open(flipped, key, "bkp_1")],
      ["final record dropped (truncated at a record boundary)", open(sealed.subarray(0, rs[3]![0]), key, "bkp_1")],
      ["truncated mid-record", open(sealed.subarray(0, rs[2]![0] + 50), key, "bkp_1")],
      ["records reordered", open(Buffer.concat([header, rec(1), rec(0), rec(2), rec(3)]), key, "bkp_1")],
      ["record repeated", open(Buffer.concat([header, rec(0), rec(0), rec(1), rec(2), rec(3)]), key, "bkp_1")],
      ["data after the final record", open(Buffer.concat([sealed, Buffer.from("x")]), key, "bkp_1")],
      ["not encrypted", open(Buffer.from("PGDMP plain archive"), key, "bkp_1")],
    ];
    for (const [what, attempt] of attempts)
      await expect(attempt, what).rejects.toThrow(/backup archive cannot be opened/);
  });

  it("hands out no byte of a record before its tag checked out", async () => {
    const sealed = await collect(sealArchive(chunks(data), key, "bkp_1"));
    const rs = records(sealed);
    const flipped = Buffer.from(sealed);
    flipped[rs[1]![1] - 1]! ^= 1; // the last byte of record 1's tag
    const seen: Buffer[] = [];
    await expect(
      (async () => {
        for await (const p of openArchive(chunks(flipped), key, "bkp_1", { allowPlain: false })) seen.push(p);
      })(),
    ).rejects.toThrow(/record 1 failed authentication/);
    expect(Buffer.concat(seen).equals(data.subarray(0, recordPlaintextLength))).toBe(true);
  });
});

describe("backups on disk", () => {
  let service: TestService;
  let api: ReturnType<typeof client>;
  let db: Json;

  async function completedBackup(): Promise<{ id: string; path: string; sha256: string }> {
    const created = await api("POST", `/v1/databases/${db.id}/backups`);
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    return eventually(async () => {
      const [row] = await sql<{ status: string; path: string; sha256: string }>(
        service.controlUrl,
        "SELECT status, path, sha256 FROM backups WHERE id = $1",
        [id],
      );
      if (row!.status !== "completed") throw new Error(row!.status);
      return { id, path: row!.path, sha256: row!.sha256 };
    });
  }

  async function settled(): Promise<string> {
    return eventually(async () => {
      const s = (await api("GET", `/v1/databases/${db.id}`)).body.data.status as string;
      if (s === "recovering" || s === "provisioning") throw new Error(s);
      return s;
    });
  }

  /** Puts `content` in place of the backup's file and records its checksum, as someone able to write both would. */
  async function replaceArchive(backup: { id: string; path: string }, content: Buffer): Promise<void> {
    await writeFile(backup.path, content);
    await sql(service.controlUrl, "UPDATE backups SET sha256 = $2, size = $3 WHERE id = $1", [
      backup.id,
      createHash("sha256").update(content).digest("hex"),
      content.length,
    ]);
  }

  async function restore(backupId: string): Promise<string> {
    expect(
      (await api("POST", `/v1/databases/${db.id}/restore`, { source: { type: "backup", databaseId: db.id, backupId } }))
        .status,
    ).toBe(200);
    return settled();
  }

  beforeAll(async () => {
    service = await startTestService();
    api = client(service, service.token);
    db = (await api("POST", "/v1/projects", { name: "at-rest" })).body.data.database;
    await eventually(async () => expect((await api("GET", `/v1/databases/${db.id}`)).body.data.status).toBe("ready"));
    await sql(db.connectionString, "CREATE TABLE secrets (v text)");
    await sql(db.connectionString, "INSERT INTO secrets SELECT 'tenant-secret-' || g FROM generate_series(1, 20000) g");
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("are sealed (no pg_dump archive on disk), 0600 in 0700 directories, with the checksum of the stored file", async () => {
    const backup = await completedBackup();
    const content = await readFile(backup.path);
    expect(content.subarray(0, 8).toString()).toBe("MDSBAK01");
    expect(content.includes(Buffer.from("tenant-secret-"))).toBe(false);
    expect(createHash("sha256").update(content).digest("hex")).toBe(backup.sha256);
    expect((await stat(backup.path)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(backup.path))).mode & 0o777).toBe(0o700);
    expect((await stat(path.join(service.dir, "backups"))).mode & 0o777).toBe(0o700);
    const { bindir } = await findPostgresBinaries();
    await expect(run(path.join(bindir, "pg_restore"), ["--list", backup.path])).rejects.toThrow();
  });

  it("a changed, truncated or swapped archive is refused even with a matching checksum; the data stays", async () => {
    const first = await completedBackup();
    await sql(db.connectionString, "INSERT INTO secrets VALUES ('later')");
    const second = await completedBackup();
    const sealed = await readFile(second.path);
    const rs = records(sealed);
    const flipped = Buffer.from(sealed);
    flipped[rs[0]![0] + 40]! ^= 1;
    const variants: [string, Buffer][] = [
      ["flipped bit", flipped],
      ["truncated at a record boundary", sealed.subarray(0, rs.at(-1)![0])],
      ["another backup's archive", await readFile(first.path)],
    ];
    for (const [what, content] of variants) {
      await replaceArchive(second, content);
      expect(await restore(second.id), what).toBe("failure");
      expect(await sql(db.connectionString, "SELECT count(*)::int AS n FROM secrets WHERE v = 'later'"), what).toEqual([
        { n: 1 },
      ]);
    }
    await replaceArchive(second, sealed);
    expect(await restore(second.id)).toBe("ready");
    expect(await sql(db.connectionString, "SELECT count(*)::int AS n FROM secrets WHERE v = 'later'")).toEqual([
      { n: 1 },
    ]);
  });

  it("a database created from a changed archive fails and is dropped: no half-restored data stays reachable", async () => {
    const backup = await completedBackup();
    const sealed = await readFile(backup.path);
    const rs = records(sealed);
    const flipped = Buffer.from(sealed);
    flipped[rs.at(-1)![0] + 40]! ^= 1; // the last record: everything before it has been restored when it is refused
    await replaceArchive(backup, flipped);
    const projectId = (await api("GET", `/v1/databases/${db.id}`)).body.data.project.id as string;
    const created = await api("POST", "/v1/databases", {
      projectId,
      source: { type: "backup", databaseId: db.id, backupId: backup.id },
    });
    expect(created.status).toBe(201);
    const copy = created.body.data as Json;
    const status = await eventually(async () => {
      const s = (await api("GET", `/v1/databases/${copy.id}`)).body.data as Json;
      if (s.status === "provisioning") throw new Error("still provisioning");
      return s;
    });
    expect(status.status).toBe("failure");
    const [row] = await sql<{ failure_reason: string; pg_name: string }>(
      service.controlUrl,
      "SELECT failure_reason, pg_name FROM databases WHERE id = $1",
      [copy.id],
    );
    expect(row!.failure_reason).toMatch(/failed authentication/);
    expect(
      await sql(service.postgresUrl, "SELECT count(*)::int AS n FROM pg_database WHERE datname = $1", [row!.pg_name]),
    ).toEqual([{ n: 0 }]);
    await replaceArchive(backup, sealed);
  });

  it("an old plain pg_dump archive (taken before encryption) still restores when its checksum matches", async () => {
    const backup = await completedBackup();
    const { bindir } = await findPostgresBinaries();
    const plainFile = `${backup.path}.plain`;
    await run(path.join(bindir, "pg_dump"), [
      "-Fc",
      "--no-owner",
      "--no-acl",
      "-f",
      plainFile,
      "-d",
      withDatabase(service.postgresUrl, new URL(db.connectionString).pathname.slice(1)),
    ]);
    await sql(db.connectionString, "DELETE FROM secrets");
    await replaceArchive(backup, await readFile(plainFile));
    expect(await restore(backup.id)).toBe("ready");
    expect(await sql(db.connectionString, "SELECT count(*)::int AS n FROM secrets")).toEqual([{ n: 20001 }]);
  });
});
