// Reads what `pg_restore -j` reads to schedule its work, from the plaintext of a custom-format archive streamed from
// the start: the table of contents (each entry's dump id, descriptor, section and dependencies) and the size of each
// table's data. From a pipe pg_restore lists no dependencies and no sizes (`--list` prints neither, and an archive
// written to a pipe has no data offsets), and without them the restore cannot give each table's indexes to the run
// that loads that table, nor balance the runs. Only archive versions 1.12 to 1.15 (pg_dump 11 to 16) are read;
// anything else is `undefined`, and the caller falls back to the plan made of `pg_restore --list`.

type TocEntry = { id: number; desc: string; section: number; deps: number[] };
export type Toc = { entries: TocEntry[]; dataBytes: Map<number, number> };

class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Buffer>;
  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }
  /**
   * At least `n` bytes buffered, else false at the end. The chunks are joined once: a tenant's comment or function
   * body in the table of contents can be hundreds of MB, and joining chunk by chunk copied it once per chunk
   * (70 s of the service's event loop for 64 MB).
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
  async bytes(n: number): Promise<Buffer> {
    if (!(await this.fill(n))) throw new Error("archive ends inside its table of contents");
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }
  async skip(n: number): Promise<void> {
    while (n > 0) {
      if (!this.buf.length && !(await this.fill(1))) throw new Error("archive ends inside a data block");
      const take = Math.min(n, this.buf.length);
      this.buf = this.buf.subarray(take);
      n -= take;
    }
  }
  /** Consumes the rest, so the source is read (and authenticated) to its end. */
  async drain(): Promise<void> {
    for (let next = await this.it.next(); !next.done; next = await this.it.next());
  }
}

const blockData = 1;

/**
 * With `dataSizes: false` only the table of contents is read (its `dataBytes` empty) and the rest of the source is
 * left unread: for a restore that has its sizes from the dump (backups.data_bytes), so its plan need not wait for a
 * read of the whole archive. What was read was authenticated all the same; the runs read the rest.
 */
export async function readToc(
  source: AsyncIterable<Buffer>,
  options: { dataSizes: boolean } = { dataSizes: true },
): Promise<Toc | undefined> {
  const r = new Reader(source);
  let drain = true;
  try {
    if ((await r.bytes(5)).toString("latin1") !== "PGDMP") return undefined;
    const [major, minor] = await r.bytes(3);
    const version = major! * 100 + minor!;
    if (version < 112 || version > 115) return undefined;
    const [intSize, offSize, format] = await r.bytes(3);
    if (format !== 1 || !intSize || intSize > 6 || offSize === undefined) return undefined; // 1: custom
    const int = async () => {
      const b = await r.bytes(1 + intSize);
      const value = b.readUIntLE(1, intSize);
      return b[0] ? -value : value;
    };
    const str = async () => {
      const n = await int();
      return n < 0 ? null : (await r.bytes(n)).toString("utf8");
    };
    if (version >= 115) await r.bytes(1);
    else await int(); // compression
    for (let i = 0; i < 7; i++) await int(); // creation time
    await str(); // database name
    await str(); // server version
    await str(); // pg_dump version
    const count = await int();
    const entries: TocEntry[] = [];
    for (let i = 0; i < count; i++) {
      const id = await int();
      await int(); // hadDumper
      await str(); // tableoid
      await str(); // oid
      await str(); // tag
      const desc = (await str()) ?? "";
      const section = await int();
      // defn, dropStmt, copyStmt, namespace, tablespace, tableam (from 1.14), owner, withOids
      for (let f = 0; f < (version >= 114 ? 8 : 7); f++) await str();
      const deps: number[] = [];
      for (let dep = await str(); dep !== null; dep = await str()) deps.push(Number(dep));
      await r.bytes(1 + offSize); // the data's offset, unset when written to a pipe
      entries.push({ id, desc, section, deps });
    }
    // The data offsets (after each entry's state byte) are not needed: the blocks follow, each `type ‖ dumpId ‖
    // chunks (length ‖ bytes) … ‖ 0`; large objects (type 3) come last and are not measured.
    const dataBytes = new Map<number, number>();
    if (!options.dataSizes) {
      drain = false;
      return { entries, dataBytes };
    }
    while (!(await r.atEnd())) {
      const [type] = await r.bytes(1);
      if (type !== blockData) break;
      const id = await int();
      let size = 0;
      for (let n = await int(); n > 0; n = await int()) {
        await r.skip(n);
        size += n;
      }
      dataBytes.set(id, size);
    }
    return { entries, dataBytes };
  } finally {
    if (drain) await r.drain();
  }
}
