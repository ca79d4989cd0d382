// What `pg_restore -j` does, split into passes that each read the archive from a pipe (dump.ts runs them): pre-data
// alone; then k runs at once, each loading its tables and building each one's indexes and constraints right after
// its data (planLanes, from the archive's table of contents: archive-toc.ts); then the rest of post-data (foreign
// keys, index attachments, triggers, rules, policies, comments, materialized view refreshes…) in one run in archive
// order, as they may depend on each other and on all of the above. Without a table of contents (an archive version
// it does not read), and for a clone (whose large tables are piped in after the archive's data), the data and the
// indexes are two rounds of k runs (planData, planPostData).
//
// The plan is made of `pg_restore --list` output. A list line is `<dumpId>; <catalogOid> <oid> <DESC> <namespace>
// <tag> <owner>`; only the dump ids go back to pg_restore (`-L` reads the leading integer of each line), so no name a
// tenant wrote is ever handed back to it. The descriptor is read right after the two oids. A name that imitates a
// descriptor can only move an entry into the serial run (`INDEX ATTACH …` wins over `INDEX …`), never out of it.

const line = /^(\d+); \d+ \d+ (.*)$/;

export type ListEntry = { id: number; rest: string };
/** A `pg_restore --list` output: its text (tests), or its entries as ListingReader collected them. */
type Listing = string | readonly ListEntry[];

/** The entries of a `pg_restore --list` output, in archive order, each id once. */
export function parseList(text: string): ListEntry[] {
  const reader = new ListingReader(Infinity);
  reader.push(Buffer.from(text, "latin1"));
  return reader.end();
}

const entriesOf = (listing: Listing): readonly ListEntry[] =>
  typeof listing === "string" ? parseList(listing) : listing;

/** What ListingReader reads of a line: the dump id, the two oids and the descriptor fit with room to spare. */
const lineHead = 256;
/** What it keeps of the rest of it: the descriptor's start, all the plan looks at (isTableData, isIndexOrConstraint). */
const restHead = 32;

/**
 * Reads a `pg_restore --list` output as it streams, never holding it whole: a tenant decides how long its names and
 * signatures are (26,000 functions with long signatures printed past V8's longest string and crashed the service). Of
 * each line only its first `lineHead` characters are read and `restHead` of its descriptor kept (nothing with
 * `count`: a check that only counts), and past `maxEntries` entries `push` throws: the archive has more objects than
 * the service restores (`archiveEntryLimit`). Latin-1: the kept part is ASCII, and a multibyte character split between
 * two chunks cannot turn into anything else.
 */
export class ListingReader {
  private readonly entries: ListEntry[] = [];
  private readonly seen = new Set<number>();
  private head = "";
  private readonly maxEntries: number;
  private readonly keep: boolean;
  constructor(maxEntries: number, options: { count?: boolean } = {}) {
    this.maxEntries = maxEntries;
    this.keep = !options.count;
  }
  push(chunk: Buffer): void {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      this.take(chunk, from, nl);
      this.line();
      from = nl + 1;
    }
    this.take(chunk, from, chunk.length);
  }
  /** The entries, once the output ended. */
  end(): ListEntry[] {
    this.line();
    return this.entries;
  }
  private take(chunk: Buffer, from: number, to: number): void {
    const room = lineHead - this.head.length;
    if (room > 0 && to > from) this.head += chunk.toString("latin1", from, Math.min(to, from + room));
  }
  private line(): void {
    const m = line.exec(this.head);
    this.head = "";
    if (!m) return;
    const id = Number(m[1]);
    if (this.seen.has(id)) return;
    if (this.seen.size >= this.maxEntries)
      throw new ArchiveLimitError(`the backup archive lists more than ${this.maxEntries} objects`);
    this.seen.add(id);
    // sliced, then flattened: a slice of a string can keep its whole parent alive.
    if (this.keep) this.entries.push({ id, rest: ` ${m[2]!.slice(0, restHead)}`.slice(1) });
  }
}

/** An archive past a limit of the service (archiveEntryLimit): its job fails for good (dump.ts makes it a JobLimitError). */
export class ArchiveLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArchiveLimitError";
  }
}

const isTableData = (rest: string) => rest.startsWith("TABLE DATA ");
/** Exactly `INDEX` or `CONSTRAINT`: independent of each other once the data is in. */
const isIndexOrConstraint = (rest: string) =>
  (rest.startsWith("INDEX ") && !rest.startsWith("INDEX ATTACH ")) || rest.startsWith("CONSTRAINT ");

/** Deals `ids` round-robin over `k` lists, keeping archive order within each; drops the empty ones. */
function deal(ids: number[], k: number): number[][] {
  const lists: number[][] = Array.from({ length: k }, () => []);
  ids.forEach((id, i) => lists[i % k]!.push(id));
  return lists.filter((l) => l.length > 0);
}

/**
 * The data section (`--list --section=data`) as up to `k` lists of dump ids, to be restored in parallel. Each list
 * keeps archive order: from a pipe, pg_restore can only read forward.
 */
export function planData(listing: Listing, k: number): number[][] {
  const lists: number[][] = Array.from({ length: k }, () => []);
  let table = 0;
  for (const e of entriesOf(listing)) lists[isTableData(e.rest) ? table++ % k : 0]!.push(e.id);
  return lists.filter((l) => l.length > 0);
}

/**
 * The post-data section (`--list --section=post-data`): up to `k` lists of indexes and constraints to run in
 * parallel, then the list of everything else, to run alone afterwards in archive order (empty when nothing is left).
 */
export function planPostData(listing: Listing, k: number): { parallel: number[][]; after: number[] } {
  const entries = entriesOf(listing);
  return {
    parallel: deal(
      entries.filter((e) => isIndexOrConstraint(e.rest)).map((e) => e.id),
      k,
    ),
    after: entries.filter((e) => !isIndexOrConstraint(e.rest)).map((e) => e.id),
  };
}

/** A `-L` file: one dump id a line. */
export const listFile = (ids: number[]): string => ids.map((id) => `${id}\n`).join("");

/**
 * Deals tables over up to `k` lanes, largest first, each to the lane with the least so far (a clone pipes each lane
 * through one pg_dump | pg_restore). Returns the lanes' items, empty lanes dropped.
 */
export function dealBySize<T>(tables: { item: T; size: number }[], k: number): T[][] {
  const lanes = Array.from({ length: k }, () => ({ size: 0, items: [] as T[] }));
  for (const t of [...tables].sort((a, b) => b.size - a.size)) {
    const lane = lanes.reduce((least, l) => (l.size < least.size ? l : least));
    lane.items.push(t.item);
    lane.size += t.size;
  }
  return lanes.filter((l) => l.items.length > 0).map((l) => l.items);
}

/**
 * A pg_dump `-t` pattern that matches exactly the table `schema.name`: inside double quotes pg_dump escapes every
 * regular-expression character, and a double quote is written twice.
 */
export const exactTablePattern = (schema: string, name: string): string =>
  `"${schema.replaceAll('"', '""')}"."${name.replaceAll('"', '""')}"`;

/**
 * The plan `pg_restore -j` would make, from the archive's own table of contents (archive-toc.ts), for the entries
 * `pg_restore --list` printed: each table's data and then its indexes and constraints go to one of up to `k` lanes
 * (one run each, balanced by data size, archive order kept), so a lane builds a table's indexes while another still
 * loads data. Other data (sequence values, large objects) goes to the first lane; an index or constraint of no loaded
 * table (a partitioned parent's, a materialized view's) to the end of a lane; anything that depends on another
 * post-data entry, and the rest of post-data, runs `after`, alone, in archive order.
 */
export function planLanes(
  dataListing: Listing,
  postListing: Listing,
  toc: { entries: { id: number; desc: string; section: number; deps: number[] }[]; dataBytes: Map<number, number> },
  k: number,
): { lanes: number[][]; after: number[] } {
  const byId = new Map(toc.entries.map((e) => [e.id, e]));
  const data = entriesOf(dataListing).map((e) => e.id);
  const post = entriesOf(postListing).map((e) => e.id);
  // The table each TABLE DATA entry loads, and its lane.
  const tableOf = new Map<number, number>();
  for (const id of data) {
    const e = byId.get(id);
    const tables = e?.desc === "TABLE DATA" ? e.deps.filter((d) => byId.get(d)?.desc === "TABLE") : [];
    if (tables.length === 1) tableOf.set(id, tables[0]!);
  }
  const laneOfTable = new Map<number, number>();
  dealBySize(
    [...tableOf].map(([id, table]) => ({ item: table, size: toc.dataBytes.get(id) ?? 0 })),
    k,
  ).forEach((tables, lane) => tables.forEach((t) => laneOfTable.set(t, lane)));
  const followers = new Map<number, number[]>(); // table → its indexes and constraints
  const free: number[] = [];
  const after: number[] = [];
  for (const id of post) {
    const e = byId.get(id);
    const deps = [...new Set(e?.deps ?? [])];
    const parallel =
      e !== undefined &&
      (e.desc === "INDEX" || e.desc === "CONSTRAINT") &&
      deps.every((d) => byId.get(d)?.section !== 4 && byId.has(d));
    const tables = deps.filter((d) => laneOfTable.has(d));
    if (!parallel) after.push(id);
    else if (tables.length === 1) {
      // Appended in place: a tenant decides how many indexes a table has, and copying the list per index is quadratic.
      const list = followers.get(tables[0]!);
      if (list === undefined) followers.set(tables[0]!, [id]);
      else list.push(id);
    } else if (tables.length === 0) free.push(id);
    else after.push(id);
  }
  const lanes: number[][] = Array.from({ length: k }, () => []);
  for (const id of data) {
    const table = tableOf.get(id);
    if (table === undefined) lanes[0]!.push(id);
    else {
      // One push per id: spreading a table's followers into one call throws past about 120,000 of them.
      const lane = lanes[laneOfTable.get(table)!]!;
      lane.push(id);
      for (const follower of followers.get(table) ?? []) lane.push(follower);
    }
  }
  free.forEach((id, i) => lanes[i % k]!.push(id));
  return { lanes: lanes.filter((l) => l.length > 0), after };
}
