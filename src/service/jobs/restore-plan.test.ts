import { describe, expect, it } from "vitest";
import {
  ArchiveLimitError,
  ListingReader,
  listFile,
  parseList,
  planData,
  planLanes,
  planPostData,
} from "./restore-plan.ts";

// As `pg_restore --list --section=…` prints them (PostgreSQL 15).
const data = `;
; Archive created at 2026-11-26 04:00:00 UTC
;
; Selected TOC Entries:
;
3390; 0 16390 TABLE DATA public child owner
3392; 0 16400 TABLE DATA public events_2024 owner
3393; 0 16405 TABLE DATA public events_2025 owner
3389; 0 16385 TABLE DATA public parent owner
3399; 0 0 SEQUENCE SET public child_id_seq owner
3400; 2613 424242 BLOB DATA - BLOBS -
`;
const post = `;
3220; 2606 16395 CONSTRAINT public child child_pkey owner
3224; 1259 16410 INDEX public events_v owner
3225; 1259 16411 INDEX public events_2024_v_idx owner
3228; 0 0 INDEX ATTACH public events_2024_v_idx owner
3229; 1259 16420 INDEX ATTACH weird owner
3230; 2620 16430 TRIGGER public child child_touch owner
3231; 2606 16431 FK CONSTRAINT public child child_parent_id_fkey owner
3232; 0 16432 MATERIALIZED VIEW DATA public child_counts owner
3225; 1259 16411 INDEX public events_2024_v_idx owner
`;

describe("restore plan", () => {
  it("reads the dump ids of entries, once each, skipping comments", () => {
    expect(parseList(post).map((e) => e.id)).toEqual([3220, 3224, 3225, 3228, 3229, 3230, 3231, 3232]);
  });

  it("deals table data over the runs, other data in the first, each list in archive order", () => {
    expect(planData(data, 2)).toEqual([
      [3390, 3393, 3399, 3400],
      [3392, 3389],
    ]);
    expect(planData(data, 1)).toEqual([[3390, 3392, 3393, 3389, 3399, 3400]]);
    expect(planData(";\n", 2)).toEqual([]);
  });

  it("runs exactly INDEX and CONSTRAINT in parallel; the rest after, in archive order", () => {
    expect(planPostData(post, 2)).toEqual({
      parallel: [[3220, 3225], [3224]],
      // `INDEX ATTACH weird`: an index in a schema named ATTACH reads like an attachment: it stays serial.
      after: [3228, 3229, 3230, 3231, 3232],
    });
  });

  it("writes one id a line", () => {
    expect(listFile([3, 1, 2])).toBe("3\n1\n2\n");
  });

  // The table of contents pg_dump 15 wrote for: parent (PK, UNIQUE), child (PK, index, FK to parent), a partitioned
  // table ev (PK) with partition ev1, a large object (archive-toc.ts reads it).
  const toc = {
    entries: [
      [216, "TABLE", 2, []],
      [215, "SEQUENCE", 2, [216]],
      [217, "TABLE", 2, []],
      [218, "TABLE", 2, [217]],
      [214, "TABLE", 2, []],
      [3368, "TABLE DATA", 3, [216]],
      [3369, "TABLE DATA", 3, [218]],
      [3366, "TABLE DATA", 3, [214]],
      [3380, "SEQUENCE SET", 3, [215]],
      [3371, "BLOBS", 3, []],
      [3217, "CONSTRAINT", 4, [216]],
      [3219, "CONSTRAINT", 4, [217, 217]],
      [3221, "CONSTRAINT", 4, [3219, 218, 218, 218]],
      [3212, "CONSTRAINT", 4, [214]],
      [3214, "CONSTRAINT", 4, [214]],
      [3215, "INDEX", 4, [216]],
      [3222, "INDEX ATTACH", 4, [218, 3219, 3221, 3219, 218, 217]],
      [3223, "FK CONSTRAINT", 4, [3214, 214, 216]],
    ].map(([id, desc, section, deps]) => ({
      id: id as number,
      desc: desc as string,
      section: section as number,
      deps: deps as number[],
    })),
    dataBytes: new Map([
      [3368, 15401],
      [3369, 13],
      [3366, 3217],
    ]),
  };
  const listing = (section: number) =>
    toc.entries
      .filter((e) => e.section === section)
      .map((e) => `${e.id}; 0 0 ${e.desc} public x owner`)
      .join("\n");

  it("gives each table's indexes and constraints to the lane that loads it, lanes balanced by size", () => {
    expect(planLanes(listing(3), listing(4), toc, 2)).toEqual({
      // child (15 KB) alone; parent and ev1 share the other lane. The partitioned parent's constraint (no data of its
      // own) goes to the end of a lane; ev1's, which depends on it, and everything else runs after.
      lanes: [
        [3368, 3217, 3215, 3380, 3371, 3219],
        [3369, 3366, 3212, 3214],
      ],
      after: [3221, 3222, 3223],
    });
  });

  it("an entry the table of contents does not know runs after, alone", () => {
    const plan = planLanes(listing(3), `${listing(4)}\n9999; 0 0 INDEX public ghost owner`, toc, 2);
    expect(plan.after).toContain(9999);
  });

  // A tenant decides how many indexes its tables have, and the plan is made in the service's event loop: copying a
  // table's list of followers for each new one took 36 s for 50,000 indexes on one table (every request of every
  // workspace waited), and spreading them into one push call throws past about 120,000 arguments.
  it("plans 150,000 indexes on one table in linear time, without one call per index's argument", () => {
    const n = 150_000;
    const entries = [
      { id: 1, desc: "TABLE", section: 2, deps: [] as number[] },
      { id: 2, desc: "TABLE DATA", section: 3, deps: [1] },
    ];
    const post: string[] = [];
    for (let i = 0; i < n; i++) {
      entries.push({ id: 10 + i, desc: "INDEX", section: 4, deps: [1] });
      post.push(`${10 + i}; 0 0 INDEX public i${i} owner`);
    }
    const started = performance.now();
    const plan = planLanes("2; 0 0 TABLE DATA public t owner", post.join("\n"), { entries, dataBytes: new Map() }, 4);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(plan.lanes).toHaveLength(1);
    expect(plan.lanes[0]).toHaveLength(n + 1);
    expect(plan.after).toEqual([]);
  }, 60_000);
});

describe("a pg_restore --list output as it streams (ListingReader)", () => {
  it("reads a listing past V8's longest string, keeping of each line only what the plan needs", () => {
    // 600 lines of 1 MiB each (a function's signature as long as a tenant likes): 600 MiB, past the ~512 MiB a
    // string may hold, which collected into one string threw RangeError in a stream callback and ended the service.
    const filler = Buffer.alloc(1024 * 1024, "a");
    const reader = new ListingReader(1000);
    for (let id = 1; id <= 600; id++) {
      reader.push(Buffer.from(`${id}; 1255 ${16000 + id} FUNCTION public f${id}(`));
      reader.push(filler);
      reader.push(Buffer.from(`) owner\n`));
    }
    const entries = reader.end();
    expect(entries).toHaveLength(600);
    expect(entries[599]!.id).toBe(600);
    expect(entries[0]!.rest.startsWith("FUNCTION public f1(aaa")).toBe(true);
    expect(entries[0]!.rest.length).toBeLessThanOrEqual(32);
  });

  it("splits lines wherever the chunks end, and reads a last line without its newline", () => {
    const text = "12; 0 0 TABLE DATA public t owner\n13; 0 0 INDEX public i owner";
    const reader = new ListingReader(10);
    for (const ch of Buffer.from(text)) reader.push(Buffer.from([ch]));
    expect(reader.end()).toEqual([
      { id: 12, rest: "TABLE DATA public t owner" },
      { id: 13, rest: "INDEX public i owner" },
    ]);
  });

  it("refuses a listing past its entries, naming the limit", () => {
    const reader = new ListingReader(3);
    const lines = [1, 2, 3, 4].map((id) => `${id}; 0 0 FUNCTION public f${id}() owner\n`).join("");
    expect(() => reader.push(Buffer.from(lines))).toThrow(ArchiveLimitError);
    expect(() => new ListingReader(3).push(Buffer.from(lines))).toThrow("the backup archive lists more than 3 objects");
    // The same id twice is one entry (as before).
    const again = new ListingReader(1);
    again.push(Buffer.from("5; 0 0 TABLE t\n5; 0 0 TABLE t\n"));
    expect(again.end()).toHaveLength(1);
    // Counting only: nothing kept, the limit still holds.
    const counting = new ListingReader(3, { count: true });
    expect(() => counting.push(Buffer.from(lines))).toThrow(ArchiveLimitError);
    const counted = new ListingReader(3, { count: true });
    counted.push(Buffer.from(lines.split("\n").slice(0, 3).join("\n")));
    expect(counted.end()).toEqual([]);
  });
});
