import { describe, expect, it } from "vitest";
import type { TenantLimits } from "./config.ts";
import { sessionsToEnd, type LoginOwner, type ServerSession } from "./tenant-guard.ts";

const limits: TenantLimits = { loginConnectionLimit: 2, databaseConnectionLimit: 3, workspaceConnectionLimit: 4, idleInTransactionTimeoutMs: 1000 };
const owners = new Map<string, LoginOwner>([
  ["a1", { database: "da", workspace: "w1", region: "us-east-1" }],
  ["a2", { database: "da", workspace: "w1", region: "us-east-1" }],
  ["b1", { database: "db", workspace: "w1", region: "us-east-1" }],
  ["c1", { database: "dc", workspace: "w2", region: "us-east-1" }],
]);
let pid = 0;
const s = (login: string, idleMs: number | null = null): ServerSession => ({ pid: ++pid, login, database: "x", idleMs });
const verdicts = (sessions: ServerSession[]) => sessionsToEnd(sessions, owners, () => limits).map((v) => [sessions.find((x) => x.pid === v.pid)!.login, v.reason]);

describe("sessionsToEnd", () => {
  it("keeps the oldest sessions within each limit and ends the newest past it", () => {
    expect(verdicts([s("a1"), s("a1"), s("a1")])).toEqual([["a1", "login limit"]]);
    expect(verdicts([s("a1"), s("a1"), s("a2"), s("a2")])).toEqual([["a2", "database limit"]]);
    expect(verdicts([s("a1"), s("a1"), s("a2"), s("b1"), s("b1"), s("c1")])).toEqual([["b1", "workspace limit"]]);
  });

  it("ends a session idle in a transaction too long, and does not count it against the others", () => {
    expect(verdicts([s("a1", 5000), s("a1", 999), s("a1")])).toEqual([["a1", "idle in transaction"]]);
  });

  it("never touches a login the control database does not know (the pooler's, a job's)", () => {
    expect(verdicts([s("mds_pooler"), s("mds_pooler"), s("mds_pooler", 10_000)])).toEqual([]);
  });

  it("leaves idle transactions alone when the region's timeout is 0", () => {
    expect(sessionsToEnd([s("a1", 10_000_000)], owners, () => ({ ...limits, idleInTransactionTimeoutMs: 0 }))).toEqual([]);
  });
});
