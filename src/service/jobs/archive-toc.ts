// Reads what `pg_restore -j` reads to schedule its work, from the plaintext of a custom-format archive streamed from
// the start: the table of contents (each entry's dump id, descriptor, section and dependencies). `pg_restore --list`
// prints no dependencies, and without them the restore cannot give each table's indexes to the run that loads that
// table. (Nor are there data sizes: an archive written to a pipe has no data offsets.) Only archive versions 1.12 to 1.15 (pg_dump 11 to 16) are read;
// anything else is `undefined`, and the caller falls back to the plan made of `pg_restore --list`.

export type TocEntry = { id: number; desc: string; section: number; deps: number[] };
export type Toc = { entries: TocEntry[]; dataBytes: Map<number, number> };

class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private readonly it: AsyncIterator<Buffer>;
  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }
  private async fill(n: number): Promise<boolean> {
    while (this.buf.length < n) {
      const next = await this.it.next();
      if (next.done) return false;
      this.buf = this.buf.length ? Buffer.concat([this.buf, next.value]) : next.value;
    }
    return true;
  }
  async bytes(n: number): Promise<Buffer> {
    if (!(await this.fill(n))) throw new Error("archive ends inside its table of contents");
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  /** Stops reading: only the table of contents is needed (nothing read here reaches pg_restore). */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}

export async function readToc(source: AsyncIterable<Buffer>): Promise<Toc | undefined> {
  const r = new Reader(source);
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
    // The data sizes would take reading (and decrypting) the whole archive, which cost the restore more (about 1 s
    // of 7 on this machine, on its critical path) than a balance by size saved: they are not read.
    const dataBytes = new Map<number, number>();
    return { entries, dataBytes };
  } finally {
    await r.close();
  }
}
