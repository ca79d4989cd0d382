// Reads a custom-format archive's plaintext as pg_restore reads it from a pipe, streamed from the start: the header,
// the table of contents (each entry's dump id, descriptor, section, dependencies and whether it has data), then the
// data blocks, each `type ‖ dumpId ‖ …`: a table's data (type 1) is `chunks (length ‖ bytes)… ‖ 0`, the large objects
// (type 3) are `(oid ‖ chunks… ‖ 0)… ‖ 0`. Two uses:
//   - readToc: what `pg_restore -j` reads to schedule its work (from a pipe, `--list` prints no dependencies and no
//     sizes), so a restore can give each table's indexes to the run that loads that table and balance the runs;
//   - onlyBlocksOf: the archive as one of those runs needs it, without the other runs' table data (each run of a
//     parallel restore reads its own pipe, and would otherwise be fed, and skip, every other run's data).
// Only archive versions 1.12 to 1.15 (pg_dump 11 to 16) are read; anything else is not understood, and the callers
// fall back to what they did without it (the plan of `pg_restore --list`, the archive unchanged).
//
// Integers are read exactly as pg_restore's ReadInt reads them, or not at all: a sign byte, then `intSize` bytes
// little-endian into a C int. A value past 2^31 - 1 (which pg_dump never writes) would read differently there, so it
// is "not understood" here: the filter never disagrees with pg_restore on where a block ends.

import { ArchiveLimitError } from "./restore-plan.ts";

type TocEntry = { id: number; desc: string; section: number; deps: number[] };
export type Toc = { entries: TocEntry[]; dataBytes: Map<number, number> };

/** The plaintext ends, or holds an integer pg_restore would read differently: the reader stops understanding it. */
class NotUnderstood extends Error {}

class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Buffer>;
  /** While `keeping`, every byte consumed is also kept (views, not copies), for onlyBlocksOf to pass on. */
  keeping = false;
  private kept: Buffer[] = [];
  keptBytes = 0;
  intSize = 4;
  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }
  /**
   * At least `n` bytes buffered, else false at the end. The chunks are joined once: a tenant's comment or function
   * body in the table of contents can be hundreds of MB, and joining chunk by chunk copied it once per chunk
   * (70 s of the service's event loop for 64 MB). A join copies each chunk at most once.
   */
  private async fill(n: number): Promise<boolean> {
    if (this.buf.length >= n) return true;
    const parts = [this.buf];
    let length = this.buf.length;
    let ended = false;
    while (length < n) {
      const next = await this.it.next();
      if (next.done) {
        ended = true;
        break;
      }
      parts.push(next.value);
      length += next.value.length;
    }
    this.buf = parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
    return !ended;
  }
  private consume(n: number): Buffer {
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    if (this.keeping) this.keep(out);
    return out;
  }
  keep(b: Buffer): void {
    this.kept.push(b);
    this.keptBytes += b.length;
  }
  /** Exactly `n` bytes; consumes nothing when fewer are left. */
  async bytes(n: number): Promise<Buffer> {
    if (!(await this.fill(n))) throw new NotUnderstood("the archive ends early");
    return this.consume(n);
  }
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }
  /** Consumes up to `n` bytes (at least one), without joining chunks: a long string or data chunk is streamed. */
  async skipSome(n: number): Promise<number> {
    if (!this.buf.length && !(await this.fill(1))) throw new NotUnderstood("the archive ends early");
    return this.consume(Math.min(n, this.buf.length)).length;
  }
  async skip(n: number): Promise<void> {
    while (n > 0) n -= await this.skipSome(n);
  }
  /** pg_restore's ReadInt on `bytes` (sign byte, then `intSize` bytes), for values pg_dump writes. */
  parseInt(b: Buffer, at = 0): number {
    const value = b.readUIntLE(at + 1, this.intSize);
    if (value > 0x7fffffff) throw new NotUnderstood("an integer out of range");
    return b[at] ? -value : value;
  }
  /**
   * Without a promise when the bytes are buffered (almost always): a table of contents is a few awaits per field, and
   * a tenant decides how many entries it has (100,000 indexes).
   */
  int(): number | Promise<number> {
    const n = 1 + this.intSize;
    if (this.buf.length >= n) return this.parseInt(this.consume(n));
    return this.bytes(n).then((b) => this.parseInt(b));
  }
  /** Only for pg_dump's own strings (descriptors, dependencies): a tenant's strings are skipped, never held. */
  async str(): Promise<string | null> {
    const n = await this.int();
    if (n < 0) return null;
    return (this.buf.length >= n ? this.consume(n) : await this.bytes(n)).toString("utf8");
  }
  async skipStr(): Promise<void> {
    let n = await this.int();
    if (n > 0 && this.buf.length >= n) this.consume(n);
    else while (n > 0) n -= await this.skipSome(n);
  }
  takeKept(): Buffer {
    const out = Buffer.concat(this.kept, this.keptBytes);
    this.kept = [];
    this.keptBytes = 0;
    return out;
  }
  /** What was kept, then everything not consumed yet, unchanged. */
  async *rest(): AsyncGenerator<Buffer> {
    if (this.keptBytes) yield this.takeKept();
    if (this.buf.length) yield this.buf;
    this.buf = Buffer.alloc(0);
    for (let next = await this.it.next(); !next.done; next = await this.it.next()) yield next.value;
  }
  /** Consumes the rest, so the source is read (and authenticated) to its end. */
  async drain(): Promise<void> {
    for (let next = await this.it.next(); !next.done; next = await this.it.next());
  }
  /** Stops reading the source early (closes the archive's file). */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}

/** onlyBlocksOf passes on what it keeps in pieces of about this size (one write to the pipe each). */
const passOn = 256 * 1024;

const blockData = 1;
const blockLargeObjects = 3;
/** K_OFFSET_NO_DATA: pg_restore reads no block for the entry. */
const noData = 3;

/** The header, up to the table of contents; `undefined` for an archive this does not read. */
async function readHeader(r: Reader): Promise<{ version: number; offSize: number } | undefined> {
  if ((await r.bytes(5)).toString("latin1") !== "PGDMP") return undefined;
  const [major, minor] = await r.bytes(3);
  const version = major! * 100 + minor!;
  if (version < 112 || version > 115) return undefined;
  const [intSize, offSize, format] = await r.bytes(3);
  // 4: what pg_dump writes (sizeof(int)); pg_restore reads a longer one only with a warning and undefined shifts.
  if (format !== 1 || intSize !== 4 || offSize === undefined) return undefined; // 1: custom
  if (version >= 115) await r.bytes(1);
  else await r.int(); // compression
  for (let i = 0; i < 7; i++) await r.int(); // creation time
  await r.skipStr(); // database name
  await r.skipStr(); // server version
  await r.skipStr(); // pg_dump version
  return { version, offSize };
}

/** The entries of the table of contents, one by one (the tenant decides how many). */
async function* readEntries(
  r: Reader,
  header: { version: number; offSize: number },
): AsyncGenerator<TocEntry & { hasData: boolean }> {
  const count = await r.int();
  for (let i = 0; i < count; i++) {
    const id = await r.int();
    await r.int(); // hadDumper
    await r.skipStr(); // tableoid
    await r.skipStr(); // oid
    await r.skipStr(); // tag
    const desc = (await r.str()) ?? "";
    const section = await r.int();
    // defn, dropStmt, copyStmt, namespace, tablespace, tableam (from 1.14), owner, withOids
    for (let f = 0; f < (header.version >= 114 ? 8 : 7); f++) await r.skipStr();
    const deps: number[] = [];
    for (let dep = await r.str(); dep !== null; dep = await r.str()) deps.push(Number(dep));
    const [state] = await r.bytes(1 + header.offSize); // the data's state, then its offset (unset in a pipe)
    yield { id, desc, section, deps, hasData: state !== noData };
  }
}

/**
 * The body of a data block after its header: for table data (type 1) one list of chunks `(length ‖ bytes)… ‖ 0`, for
 * large objects (type 3) `(oid ‖ chunks… ‖ 0)… ‖ 0`. Returns its chunks' bytes; meanwhile yields what the reader kept
 * whenever there is enough to pass on, so a block of any size streams through.
 */
async function* blockBody(r: Reader, type: number): AsyncGenerator<Buffer, number> {
  let size = 0;
  // An oid is read as pg_restore reads it; only whether it is 0 matters (an oid past 2^31 is written negative).
  for (let more = type === blockData || (await r.int()) !== 0; more; more = type !== blockData && (await r.int()) !== 0)
    for (let n = await r.int(); n !== 0; n = await r.int()) {
      // pg_restore reads a negative length as a huge size_t and fails; it never ends a block.
      if (n < 0) throw new NotUnderstood("a negative chunk length");
      for (let left = n; left > 0;) {
        left -= await r.skipSome(left);
        if (r.keptBytes >= passOn) yield r.takeKept();
      }
      size += n;
    }
  return size;
}

/** Reads a block's body to its end, passing nothing on. */
async function skipBlock(r: Reader, type: number): Promise<number> {
  const body = blockBody(r, type);
  for (let next = await body.next(); ; next = await body.next()) if (next.done) return next.value;
}

/**
 * With `dataSizes: false` only the table of contents is read (its `dataBytes` empty) and the rest of the source is
 * left unread: for a restore that has its sizes from the dump (backups.data_bytes), so its plan need not wait for a
 * read of the whole archive. What was read was authenticated all the same; the runs read the rest.
 */
export async function readToc(
  source: AsyncIterable<Buffer>,
  options: { dataSizes: boolean; maxEntries?: number } = { dataSizes: true },
): Promise<Toc | undefined> {
  const r = new Reader(source);
  let drain = true;
  try {
    const header = await readHeader(r);
    if (!header) return undefined;
    const entries: TocEntry[] = [];
    for await (const { id, desc, section, deps } of readEntries(r, header)) {
      // Entries are held (the plan needs their dependencies): past the service's limit the archive is refused.
      if (entries.length >= (options.maxEntries ?? Infinity)) {
        drain = false;
        throw new ArchiveLimitError(`the backup archive lists more than ${options.maxEntries} objects`);
      }
      entries.push({ id, desc, section, deps });
    }
    const dataBytes = new Map<number, number>();
    if (!options.dataSizes) {
      drain = false;
      return { entries, dataBytes };
    }
    // Large objects (type 3) come last and are not measured.
    while (!(await r.atEnd())) {
      const [type] = await r.bytes(1);
      if (type !== blockData) break;
      const id = await r.int();
      dataBytes.set(id, await skipBlock(r, type));
    }
    return { entries, dataBytes };
  } catch (err) {
    if (err instanceof NotUnderstood) return undefined;
    throw err;
  } finally {
    if (drain) await r.drain();
  }
}

/**
 * The plaintext `source` as a pg_restore run restoring the dump ids `keep` (its `-L` list) reads it: the header and
 * the table of contents unchanged, then the data blocks in archive order without the table data (type 1) of any id
 * not in `keep`, and nothing after the last block `keep` has data in. From a pipe, pg_restore looks forward for each
 * block it restores and skips any other, so it never misses a block it was not going to ask for; should it ask for one
 * anyway, it fails ("could not find block ID"), it never restores less. Only whole blocks are dropped, framed as
 * pg_restore frames them. A header, table of contents or block this does not understand is passed on with everything
 * after it unchanged (as without the filter), except inside a dropped block, which fails the read: there is no way
 * back into step with pg_restore. Linear in the archive, streaming (a tenant's strings and data are never held
 * whole). It passes on only bytes `source` yielded, in order: authenticated plaintext in, a subset of it out.
 */
export async function* onlyBlocksOf(source: AsyncIterable<Buffer>, keep: ReadonlySet<number>): AsyncGenerator<Buffer> {
  const r = new Reader(source);
  r.keeping = true;
  try {
    const wanted = new Set<number>();
    try {
      const header = await readHeader(r);
      if (!header) return yield* r.rest();
      for await (const e of readEntries(r, header)) {
        if (e.hasData && keep.has(e.id)) wanted.add(e.id);
        if (r.keptBytes >= passOn) yield r.takeKept();
      }
    } catch (err) {
      understood(err);
      return yield* r.rest();
    }
    while (wanted.size && !(await r.atEnd())) {
      // The block's header is held until it is known whether the block is passed on.
      r.keeping = false;
      const head = await r.bytes(2 + r.intSize).catch(understood);
      r.keeping = true;
      if (!head) return yield* r.rest();
      const type = head[0]!;
      let id: number | undefined;
      try {
        id = r.parseInt(head, 1);
      } catch (err) {
        understood(err);
      }
      if (id !== undefined && type === blockData && !keep.has(id)) {
        r.keeping = false;
        await skipBlock(r, type).catch((err: unknown) => {
          understood(err);
          throw new Error(`backup archive cannot be split: data block ${id} is not framed as pg_dump frames it`);
        });
        r.keeping = true;
        continue;
      }
      r.keep(head);
      // Not understood: passed on as is, with everything after it.
      if (id === undefined || (type !== blockData && type !== blockLargeObjects)) return yield* r.rest();
      try {
        yield* blockBody(r, type);
      } catch (err) {
        understood(err);
        return yield* r.rest();
      }
      wanted.delete(id);
      if (r.keptBytes >= passOn) yield r.takeKept();
    }
    if (r.keptBytes) yield r.takeKept();
  } finally {
    await r.close();
  }
}

/** Lets only NotUnderstood through (as `undefined`): any other error is the source's (a failed authentication). */
function understood(err: unknown): undefined {
  if (err instanceof NotUnderstood) return undefined;
  throw err;
}
