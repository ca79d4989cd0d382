import { describe, expect, it } from "vitest";
import { listFile, parseList, planData, planPostData } from "./restore-plan.ts";

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
});
