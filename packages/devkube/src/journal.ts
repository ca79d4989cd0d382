import { closeSync, existsSync, fsync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import path from "node:path";
import type { Obj } from "./types.ts";

/**
 * Persistence: an append-only JSON-lines journal, compacted (rewritten through a rename) at every
 * start. Each record is written with a synchronous write(2) before the request is answered: once
 * in the kernel it survives the process (`kill -9` loses nothing acknowledged). fsync runs in the
 * background, coalesced (an fsync per write costs ~30 ms on our disks, i.e. 30 writes/s), so only
 * a machine crash can lose the last fraction of a second. A torn last line is ignored.
 */
type JournalRecord = { rv: number; k: string; o: Obj } | { rv: number; k: string; d: string } | { rv: number };

interface LoadedState {
  rv: number;
  objects: Map<string, Map<string, Obj>>;
}

export class Journal {
  private fd: number | undefined;
  private readonly file: string;
  private syncing = false;
  private dirty = false;

  constructor(dir: string) {
    this.file = path.join(dir, "objects.jsonl");
  }

  load(): LoadedState {
    const objects = new Map<string, Map<string, Obj>>();
    let rv = 0;
    if (existsSync(this.file)) {
      const lines = readFileSync(this.file, "utf8").split("\n");
      for (const line of lines) {
        if (!line.trim()) continue;
        let rec: JournalRecord;
        try {
          rec = JSON.parse(line) as JournalRecord;
        } catch {
          continue; // torn write at the end of the file
        }
        rv = Math.max(rv, rec.rv);
        if ("o" in rec) {
          const meta = rec.o["metadata"] as Obj;
          const key = `${String(meta["namespace"] ?? "")}/${String(meta["name"])}`;
          let bucket = objects.get(rec.k);
          if (!bucket) objects.set(rec.k, (bucket = new Map()));
          bucket.set(key, rec.o);
        } else if ("d" in rec) {
          objects.get(rec.k)?.delete(rec.d);
        }
      }
    }
    this.compact(rv, objects);
    return { rv, objects };
  }

  /** Records appended since the last compaction (the store compacts online when this grows). */
  appended = 0;

  /** Rewrites the journal as a snapshot of the live objects (at start, and online when it grew). */
  compact(rv: number, objects: Map<string, Map<string, Obj>>): void {
    if (this.fd !== undefined) {
      closeSync(this.fd);
      this.fd = undefined;
    }
    this.appended = 0;
    const tmp = `${this.file}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, `${JSON.stringify({ rv })}\n`);
      for (const [k, bucket] of objects) {
        for (const o of bucket.values()) writeSync(fd, `${JSON.stringify({ rv, k, o })}\n`);
      }
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
    const dirFd = openSync(path.dirname(this.file), "r");
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
    this.fd = openSync(this.file, "a", 0o600);
  }

  append(rec: JournalRecord): void {
    if (this.fd === undefined) throw new Error("devkube journal is closed");
    writeSync(this.fd, `${JSON.stringify(rec)}\n`);
    this.appended++;
    this.dirty = true;
    this.syncSoon();
  }

  private syncSoon(): void {
    if (this.syncing || !this.dirty || this.fd === undefined) return;
    this.syncing = true;
    this.dirty = false;
    const fd = this.fd;
    fsync(fd, () => {
      this.syncing = false;
      this.syncSoon();
    });
  }

  close(): void {
    if (this.fd !== undefined) {
      fsyncSync(this.fd);
      closeSync(this.fd);
    }
    this.fd = undefined;
  }
}
