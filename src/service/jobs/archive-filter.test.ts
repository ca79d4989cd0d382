import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findPostgresBinaries } from "../../postgres/index.ts";
import { onlyBlocksOf, readToc } from "./archive-toc.ts";

// onlyBlocksOf feeds each run of a parallel restore only the data blocks it restores. The archives here are built by
// hand, framed as pg_dump 15 frames them (archive version 1.14, 4-byte integers, 8-byte offsets, uncompressed), so a
// test can put in what a tenant could make pg_dump write, or what pg_dump never writes; the real pg_restore reads
// them (`-f -`: the SQL it would run, data included, without a server) to show that it restores the same from the
// filtered stream as from the whole archive.

const int = (v: number, sign = v < 0 ? 1 : 0) => {
  const b = Buffer.alloc(5);
  b[0] = sign;
  b.writeUInt32LE(Math.abs(v), 1);
  return b;
};
const str = (s: string | null) => (s === null ? int(-1) : Buffer.concat([int(Buffer.byteLength(s)), Buffer.from(s)]));

type Entry = { id: number; tag: string; desc: string; section: number; defn?: string; copy?: string; deps?: number[] };
const notSet = 1; // K_OFFSET_POS_NOT_SET: data written to a pipe
const noData = 3;

function header(version = 14, intSize = 4): Buffer {
  const parts = [Buffer.from("PGDMP"), Buffer.from([1, version, 0]), Buffer.from([intSize, 8, 1]), int(0)];
  for (const v of [0, 0, 12, 26, 10, 126, 0]) parts.push(int(v)); // creation time
  parts.push(str("db"), str("15.0"), str("15.0"));
  return Buffer.concat(parts);
}

function toc(entries: Entry[], hasData: (e: Entry) => boolean): Buffer {
  const parts = [int(entries.length)];
  for (const e of entries) {
    parts.push(int(e.id), int(hasData(e) ? 1 : 0), str("0"), str("0"), str(e.tag), str(e.desc), int(e.section));
    parts.push(str(e.defn ?? ""), str(""), str(e.copy ?? ""), str("public"), str(""), str(""), str(""), str("false"));
    for (const d of e.deps ?? []) parts.push(str(String(d)));
    parts.push(str(null), Buffer.from([hasData(e) ? notSet : noData]), Buffer.alloc(8));
  }
  return Buffer.concat(parts);
}

/** A table-data block: `1 ‖ id ‖ (length ‖ bytes)… ‖ 0`, in chunks of `chunk` bytes. */
function dataBlock(id: number, data: string, chunk = 7): Buffer {
  const bytes = Buffer.from(data);
  const parts = [Buffer.from([1]), int(id)];
  for (let i = 0; i < bytes.length; i += chunk) {
    const c = bytes.subarray(i, i + chunk);
    parts.push(int(c.length), c);
  }
  parts.push(int(0));
  return Buffer.concat(parts);
}

/** A large-objects block: `3 ‖ id ‖ (oid ‖ chunks… ‖ 0)… ‖ 0`. */
function largeObjectsBlock(id: number, objects: [number, string][]): Buffer {
  const parts = [Buffer.from([3]), int(id)];
  for (const [oid, data] of objects) parts.push(int(oid), int(Buffer.byteLength(data)), Buffer.from(data), int(0));
  parts.push(int(0));
  return Buffer.concat(parts);
}

// Three tables and their data, a large object. Table 2's rows hold what looks like a block header of table 3's data:
// the filter frames by lengths, never by content.
const tables = [1, 2, 3].map((n) => ({
  table: { id: 10 + n, tag: `t${n}`, desc: "TABLE", section: 2, defn: `CREATE TABLE public.t${n} (v text);\n` },
  data: { id: 20 + n, tag: `t${n}`, desc: "TABLE DATA", section: 3, copy: `COPY public.t${n} (v) FROM stdin;\n` },
}));
const rows = (n: number) =>
  n === 2 ? `a\\001\\000\\000\\000\\000\\027\nb\n\\.\n\n` : `${"row".repeat(n)}-1\n${"row".repeat(n)}-2\n\\.\n\n`;
const blobs: Entry = { id: 30, tag: "BLOBS", desc: "BLOBS", section: 3 };
const entries: Entry[] = [
  ...tables.map((t) => t.table),
  ...tables.map((t) => ({ ...t.data, deps: [t.table.id] })),
  blobs,
];
const withData = (e: Entry) => e.desc === "TABLE DATA" || e.desc === "BLOBS";
const head = Buffer.concat([header(), toc(entries, withData)]);
const blocks = [...tables.map((t, i) => dataBlock(t.data.id, rows(i + 1))), largeObjectsBlock(30, [[424242, "lo"]])];
const archive = Buffer.concat([head, ...blocks]);

async function* chunked(b: Buffer, size = 65_536) {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}
async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of source) parts.push(p);
  return Buffer.concat(parts);
}
const filtered = (b: Buffer, keep: number[], size?: number) => collect(onlyBlocksOf(chunked(b, size), new Set(keep)));

let bindir: string;
let dir: string;
beforeAll(async () => {
  bindir = (await findPostgresBinaries()).bindir;
  dir = await mkdtemp(path.join(os.tmpdir(), "mds-archive-filter-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** What pg_restore would run for the dump ids `list`, reading `input` from a pipe. */
async function restoreScript(
  input: Buffer,
  list: number[],
): Promise<{ code: number | null; out: string; err: string }> {
  const file = path.join(dir, `${list.join("-")}.list`);
  await writeFile(file, list.map((id) => `${id}\n`).join(""));
  const child = spawn(path.join(bindir, "pg_restore"), ["-L", file, "-f", "-"], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  child.stdin.on("error", () => {});
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  // A script's \\restrict key is random on every run.
  return { code, out: out.replace(/^\\(un)?restrict .*$/gm, ""), err };
}

describe("onlyBlocksOf", () => {
  it("passes the header, the table of contents and the blocks of its ids, in order, and ends after the last", async () => {
    expect(await filtered(archive, [21, 23])).toEqual(Buffer.concat([head, blocks[0]!, blocks[2]!]));
    // A large-object block is passed on like any block of a listed id; one not listed is passed while a listed
    // block may still follow (and nothing after the last listed one).
    expect(await filtered(archive, [22, 30])).toEqual(Buffer.concat([head, blocks[1]!, blocks[3]!]));
    expect(await filtered(archive, [21])).toEqual(Buffer.concat([head, blocks[0]!]));
    // No data (a pre-data run, a list): the table of contents alone. Ids without data do not count.
    expect(await filtered(archive, [])).toEqual(head);
    expect(await filtered(archive, [11, 12, 13])).toEqual(head);
  });

  it("gives the same output whatever the chunking of its input", async () => {
    const expected = await filtered(archive, [22, 30]);
    for (const size of [1, 2, 5, 6, 7, 13, 100, 4096])
      expect(await filtered(archive, [22, 30], size)).toEqual(expected);
  });

  it("pg_restore restores from the filtered stream exactly what it restores from the whole archive", async () => {
    for (const list of [[11, 12, 13], [21, 23], [22], [22, 30], [11, 21, 30], [30]]) {
      const whole = await restoreScript(archive, list);
      expect(whole.code, whole.err).toBe(0);
      const lane = await restoreScript(await filtered(archive, list), list);
      expect({ code: lane.code, out: lane.out }).toEqual({ code: 0, out: whole.out });
    }
    // The rows of table 2, fake block header and all, reached pg_restore intact.
    expect((await restoreScript(await filtered(archive, [22]), [22])).out).toContain("a\\001\\000\\000\\000\\000\\027");
  });

  it("a run asking for a block it was not given fails: pg_restore never restores less", async () => {
    const lane = await restoreScript(await filtered(archive, [21]), [21, 23]);
    expect(lane.code).not.toBe(0);
    expect(lane.err).toMatch(/could not find block ID 23/);
  });

  it("passes an archive it does not read on unchanged: another version, another integer size, not custom", async () => {
    for (const other of [
      Buffer.concat([header(16), toc(entries, withData), ...blocks]),
      Buffer.concat([header(14, 8), ...blocks]),
      Buffer.from("not an archive at all"),
      Buffer.concat([head.subarray(0, head.length - 3)]), // ends inside its table of contents
    ])
      expect(await filtered(other, [21])).toEqual(other);
  });

  // pg_restore reads an integer into a C int: past 2^31 - 1 it reads something else than its bytes say (a string
  // length would read negative: no string at all). The filter must not frame what follows otherwise than pg_restore.
  it("passes on unchanged everything from an integer pg_restore would read differently", async () => {
    const huge = Buffer.alloc(5);
    huge.writeUInt32LE(0x80000001, 1);
    const bad = Buffer.concat([header(), int(1), int(40), int(0), str("0"), str("0"), huge, ...blocks]);
    expect(await filtered(bad, [21])).toEqual(bad);
    // A block header with such an id: passed on with the rest.
    const badBlock = Buffer.concat([Buffer.from([1]), huge, int(0)]);
    const afterBad = Buffer.concat([head, blocks[0]!, badBlock, blocks[1]!, blocks[2]!]);
    expect(await filtered(afterBad, [23])).toEqual(Buffer.concat([head, badBlock, blocks[1]!, blocks[2]!]));
    // An unknown block type: passed on with the rest (pg_restore fails on it, as it did without the filter).
    const unknown = Buffer.concat([Buffer.from([9]), int(22), int(0)]);
    const withUnknown = Buffer.concat([head, blocks[0]!, unknown, blocks[2]!]);
    expect(await filtered(withUnknown, [23])).toEqual(Buffer.concat([head, unknown, blocks[2]!]));
  });

  it("a block it passes on that is framed wrongly goes through as is; one it drops fails the read", async () => {
    const negative = Buffer.concat([Buffer.from([1]), int(22), int(3), Buffer.from("abc"), int(-5), Buffer.alloc(9)]);
    const broken = Buffer.concat([head, blocks[0]!, negative, blocks[2]!]);
    expect(await filtered(broken, [22, 23])).toEqual(Buffer.concat([head, negative, blocks[2]!]));
    await expect(filtered(broken, [23])).rejects.toThrow(/data block 22 is not framed/);
  });

  it("passes on no byte after its source fails (an archive record that did not authenticate)", async () => {
    async function* failing() {
      yield* chunked(Buffer.concat([head, blocks[0]!]), 1000);
      throw new Error("record 9 failed authentication");
    }
    const seen: Buffer[] = [];
    await expect(
      (async () => {
        for await (const p of onlyBlocksOf(failing(), new Set([21, 23]))) seen.push(p);
      })(),
    ).rejects.toThrow(/failed authentication/);
    // Everything passed on came before the failure, in order, and is a prefix of what the source yielded.
    const out = Buffer.concat(seen);
    expect(out.equals(Buffer.concat([head, blocks[0]!]).subarray(0, out.length))).toBe(true);
  });

  // A tenant decides the table of contents' size: 100,000 indexes on one table, a 64 MB comment. The filter reads
  // them streaming (never holding the comment whole) and in linear time.
  it("stays linear on 100,000 entries and on a 64 MB string", async () => {
    const many: Entry[] = [
      ...entries,
      ...Array.from({ length: 100_000 }, (_, i) => ({
        id: 1000 + i,
        tag: `i${i}`,
        desc: "INDEX",
        section: 4,
        defn: `CREATE INDEX i${i} ON public.t1 (v);\n`,
        deps: [11],
      })),
      { id: 999, tag: "t1", desc: "COMMENT", section: 2, defn: `COMMENT ON TABLE t1 IS '${"c".repeat(64 << 20)}';` },
    ];
    const big = Buffer.concat([header(), toc(many, withData), ...blocks]);
    const started = performance.now();
    const out = await filtered(big, [23]);
    // About 1 s on a quiet machine; quadratic (a join per chunk, a copy per entry) would take minutes.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(out.equals(Buffer.concat([big.subarray(0, big.length - Buffer.concat(blocks).length), blocks[2]!]))).toBe(
      true,
    );
    expect((await readToc(chunked(big)))?.entries.length).toBe(many.length);
  }, 60_000);
});
