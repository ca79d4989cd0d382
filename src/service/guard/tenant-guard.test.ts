import { describe, expect, it } from "vitest";
import type { TenantLimits } from "../config/config.ts";
import { putBackInTurn, sessionsToEnd, type LoginOwner, type ServerSession } from "./tenant-guard.ts";

const limits: TenantLimits = {
  loginConnectionLimit: 2,
  databaseConnectionLimit: 3,
  workspaceConnectionLimit: 4,
  idleInTransactionTimeoutMs: 1000,
};
const owners = new Map<string, LoginOwner>([
  ["a1", { database: "da", workspace: "w1", region: "us-east-1", revoked: false }],
  ["a2", { database: "da", workspace: "w1", region: "us-east-1", revoked: false }],
  ["b1", { database: "db", workspace: "w1", region: "us-east-1", revoked: false }],
  ["c1", { database: "dc", workspace: "w2", region: "us-east-1", revoked: false }],
  // A revoked login, or one of a deleted database whose drop job has not run yet.
  ["r1", { database: "dr", workspace: "w1", region: "us-east-1", revoked: true }],
]);
let pid = 0;
const s = (login: string, idleMs: number | null = null): ServerSession => ({
  pid: ++pid,
  login,
  database: "x",
  idleMs,
});
const verdicts = (sessions: ServerSession[]) =>
  sessionsToEnd(sessions, owners, () => limits).map((v) => [sessions.find((x) => x.pid === v.pid)!.login, v.reason]);

describe("sessionsToEnd", () => {
  it("keeps the oldest sessions within each limit and ends the newest past it", () => {
    expect(verdicts([s("a1"), s("a1"), s("a1")])).toEqual([["a1", "login limit"]]);
    expect(verdicts([s("a1"), s("a1"), s("a2"), s("a2")])).toEqual([["a2", "database limit"]]);
    expect(verdicts([s("a1"), s("a1"), s("a2"), s("b1"), s("b1"), s("c1")])).toEqual([["b1", "workspace limit"]]);
  });

  it("ends a session idle in a transaction too long, and does not count it against the others", () => {
    expect(verdicts([s("a1", 5000), s("a1", 999), s("a1")])).toEqual([["a1", "idle in transaction"]]);
  });

  it("ends every session of a revoked login, and does not count them against the others", () => {
    expect(verdicts([s("r1"), s("a1"), s("r1", 10), s("a1")])).toEqual([
      ["r1", "revoked"],
      ["r1", "revoked"],
    ]);
  });

  it("never touches a login the control database does not know (the pooler's, a job's)", () => {
    expect(verdicts([s("mds_pooler"), s("mds_pooler"), s("mds_pooler", 10_000)])).toEqual([]);
  });

  it("leaves idle transactions alone when the region's timeout is 0", () => {
    expect(sessionsToEnd([s("a1", 10_000_000)], owners, () => ({ ...limits, idleInTransactionTimeoutMs: 0 }))).toEqual(
      [],
    );
  });
});

describe("putBackInTurn", () => {
  it("does not let three databases whose rows stay locked, first in order, starve the others' put-back", async () => {
    const locked = new Set(["aa", "ab", "ac"]);
    const names = ["aa", "ab", "ac", "ba", "bb", "bc", "bd"];
    const putBack = new Set<string>();
    let cursor: string | undefined;
    // The catalog order puts the locked ones first: the old loop gave up after them on every tick.
    for (let tick = 0; tick < 2; tick++) {
      cursor = await putBackInTurn(names, cursor, async (name) => {
        if (locked.has(name)) return false;
        putBack.add(name);
        return true;
      });
    }
    expect([...putBack].sort()).toEqual(["ba", "bb", "bc", "bd"]);
  });

  it("tries a few locked databases at most per tick, and each of them in turn", async () => {
    const names = ["a", "b", "c", "d", "e", "f", "g"];
    const tried: string[][] = [];
    let cursor: string | undefined;
    for (let tick = 0; tick < 3; tick++) {
      const now: string[] = [];
      cursor = await putBackInTurn(names, cursor, async (name) => (now.push(name), false));
      tried.push(now);
    }
    expect(tried).toEqual([
      ["a", "b", "c"],
      ["d", "e", "f"],
      ["g", "a", "b"],
    ]);
  });

  it("starts from the beginning when where it stopped is gone or the last", async () => {
    const tried: string[] = [];
    expect(await putBackInTurn(["b", "c"], "z", async (n) => (tried.push(n), true))).toBeUndefined();
    expect(tried).toEqual(["b", "c"]);
  });
});
