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

/** The entries of a `pg_restore --list` output, in archive order, each id once. */
export function parseList(text: string): { id: number; rest: string }[] {
  const seen = new Set<number>();
  const entries: { id: number; rest: string }[] = [];
  for (const raw of text.split("\n")) {
    const m = line.exec(raw);
    if (!m) continue;
    const id = Number(m[1]);
    if (seen.has(id)) continue;
    seen.add(id);
    entries.push({ id, rest: m[2]! });
  }
  return entries;
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
export function planData(listing: string, k: number): number[][] {
  const lists: number[][] = Array.from({ length: k }, () => []);
  let table = 0;
  for (const e of parseList(listing)) lists[isTableData(e.rest) ? table++ % k : 0]!.push(e.id);
  return lists.filter((l) => l.length > 0);
}

/**
 * The post-data section (`--list --section=post-data`): up to `k` lists of indexes and constraints to run in
 * parallel, then the list of everything else, to run alone afterwards in archive order (empty when nothing is left).
 */
export function planPostData(listing: string, k: number): { parallel: number[][]; after: number[] } {
  const entries = parseList(listing);
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
  dataListing: string,
  postListing: string,
  toc: { entries: { id: number; desc: string; section: number; deps: number[] }[]; dataBytes: Map<number, number> },
  k: number,
): { lanes: number[][]; after: number[] } {
  const byId = new Map(toc.entries.map((e) => [e.id, e]));
  const data = parseList(dataListing).map((e) => e.id);
  const post = parseList(postListing).map((e) => e.id);
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
