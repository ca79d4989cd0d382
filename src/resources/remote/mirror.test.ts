import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createRemoteMirror } from "./mirror.ts";
import { pollDelayOf } from "./database.ts";
import { createFakeApi } from "../../../test/support/fake-api.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("remote mirror", () => {
  it("resyncs N databases with ⌈N/100⌉ list calls and serves settled ones without a call", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false });
    for (let i = 0; i < 250; i++) await api.createDatabase({ projectId: project.id, name: `d${i}` });
    const changed: string[] = [];
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      onChange: (_k, id) => changed.push(id),
    });
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    await mirror.refresh();
    expect(api.calls["listDatabases"]).toBe(3);
    const some = [...api.databases.keys()][7]!;
    expect((await mirror.getDatabase(some))?.id).toBe(some);
    expect(api.calls["getDatabase"] ?? 0).toBe(0);

    // A change seen by the next list wakes the resource that mirrors it.
    await api.updateDatabase(some, { name: "renamed" });
    await mirror.refresh();
    expect(changed).toEqual([some]);
    expect(api.calls["listDatabases"]).toBe(6);
  });

  it("reads a provisioning database one by one (fast polling) until it settles", async () => {
    const api = createFakeApi();
    api.provisioningReads = 2;
    const project = await api.createProject({ name: "p", createDatabase: false });
    const db = await api.createDatabase({ projectId: project.id, name: "d" });
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs: 0,
      onChange: () => {},
    });
    await mirror.ready();
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await mirror.getDatabase(db.id))?.status);
    expect(statuses).toEqual(["provisioning", "ready", "ready", "ready"]);
    expect(api.calls["getDatabase"]).toBe(2);
  });

  it("serves a burst of provisioning databases with list calls, not one GET each", async () => {
    const api = createFakeApi();
    api.provisioningReads = 1_000;
    const project = await api.createProject({ name: "p", createDatabase: false });
    const ids = [];
    for (let i = 0; i < 50; i++) ids.push((await api.createDatabase({ projectId: project.id, name: `d${i}` })).id);
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs: 0,
      onChange: () => {},
    });
    await mirror.ready();
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    await Promise.all(ids.map((id) => mirror.getDatabase(id)));
    expect(api.calls["getDatabase"] ?? 0).toBe(0);
    expect(api.calls["listDatabases"]).toBeLessThanOrEqual(2);
  });

  it("lists for a burst at most once per two fast intervals, so polling costs at most 0.05 calls per create at the default budget", async () => {
    const api = createFakeApi();
    api.provisioningReads = 1_000;
    const project = await api.createProject({ name: "p", createDatabase: false });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await api.createDatabase({ projectId: project.id, name: `d${i}` })).id);
    vi.useFakeTimers({ toFake: ["Date"] });
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs: 1_000,
      onChange: () => {},
    });
    await mirror.ready();
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    // Ten seconds of fast polling, a poll of every database every half second.
    for (let t = 0; t < 20; t++) {
      vi.setSystemTime(Date.now() + 500);
      await Promise.all(ids.map((id) => mirror.getDatabase(id)));
    }
    expect(api.calls["getDatabase"] ?? 0).toBe(0);
    expect(api.calls["listDatabases"]).toBe(5);
  });

  it("does not vouch for an absence when a list left out an item it could not read, or after a lost POST answer", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false });
    const mirror = createRemoteMirror({ api, logger: pino({ level: "silent" }), maxAgeMs: 60_000, onChange: () => {} });
    await mirror.ready();
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: true, value: undefined });
    mirror.suspect("k8s:u:ns/a");
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: false });
    mirror.settle("k8s:u:ns/a");
    api.unreadableItems = 1;
    await mirror.refresh();
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: false });
    expect(mirror.findProjectByLogicalId("k8s:u:ns/p")).toEqual({ known: false });
  });

  it("answers logicalId lookups without a call only after a full list in this process, and keeps the index in step", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false, logicalId: "k8s:u:ns/p" });
    const a = await api.createDatabase({ projectId: project.id, name: "a", logicalId: "k8s:u:ns/a" });
    const mirror = createRemoteMirror({ api, logger: pino({ level: "silent" }), maxAgeMs: 60_000, onChange: () => {} });
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: false });
    expect(mirror.findProjectByLogicalId("k8s:u:ns/p")).toEqual({ known: false });
    await mirror.ready();
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toMatchObject({
      known: true,
      value: { id: a.id },
    });
    expect(mirror.findDatabaseByLogicalId("proj_other", "k8s:u:ns/a")).toEqual({ known: true, value: undefined });
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/b")).toEqual({ known: true, value: undefined });
    expect(mirror.findProjectByLogicalId("k8s:u:ns/p")).toMatchObject({ known: true, value: { id: project.id } });
    expect(Object.keys(api.calls)).toEqual([]);

    // Written by this process, forgotten, removed remotely: the index follows.
    const b = await api.createDatabase({ projectId: project.id, name: "b", logicalId: "k8s:u:ns/b" });
    mirror.putDatabase(await api.getDatabase(b.id));
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/b")).toMatchObject({
      known: true,
      value: { id: b.id },
    });
    mirror.forgetDatabase(b.id);
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/b")).toEqual({ known: true, value: undefined });
    await api.deleteDatabase(a.id);
    await mirror.refresh();
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: true, value: undefined });
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/b")).toMatchObject({
      known: true,
      value: { id: b.id },
    });
  });

  it("cannot tell (known: false) when the service does not report logicalId", async () => {
    const api = createFakeApi();
    api.reportsLogicalId = false;
    const project = await api.createProject({ name: "p", createDatabase: false, logicalId: "k8s:u:ns/p" });
    await api.createDatabase({ projectId: project.id, name: "a", logicalId: "k8s:u:ns/a" });
    const mirror = createRemoteMirror({ api, logger: pino({ level: "silent" }), maxAgeMs: 60_000, onChange: () => {} });
    await mirror.ready();
    expect(mirror.findDatabaseByLogicalId(project.id, "k8s:u:ns/a")).toEqual({ known: false });
    expect(mirror.findProjectByLogicalId("k8s:u:ns/p")).toEqual({ known: false });
  });

  it("fast polling re-lists only from the first page holding a provisioning database (lists run in createdAt order)", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false });
    for (let i = 0; i < 950; i++) await api.createDatabase({ projectId: project.id, name: `old${i}` });
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs: 0,
      onChange: () => {},
    });
    api.provisioningReads = 1_000;
    const fresh = [];
    for (let i = 0; i < 30; i++) fresh.push((await api.createDatabase({ projectId: project.id, name: `new${i}` })).id);
    await mirror.ready();
    expect(api.calls["listDatabases"]).toBe(10);
    // Created by this process after the list: newer than everything listed, so on the last page or after it.
    const later = await api.createDatabase({ projectId: project.id, name: "later" });
    mirror.putDatabase(await api.getDatabase(later.id));
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    await Promise.all([...fresh, later.id].map((id) => mirror.getDatabase(id)));
    expect(api.calls["getDatabase"] ?? 0).toBe(0);
    expect(api.calls["listDatabases"]).toBe(1);

    // They settle; a tail list sees it.
    for (const id of [...fresh, later.id]) api.databases.get(id)!.status = "ready";
    await new Promise((r) => setTimeout(r, 2));
    await mirror.getDatabase(fresh[0]!);
    expect(api.calls["listDatabases"]).toBe(2);
    expect(mirror.peekDatabase(fresh[29]!)?.status).toBe("ready");
    expect(mirror.peekDatabase(later.id)?.status).toBe("ready");
  });

  it("walks everything again after a tail list missed a provisioning database", async () => {
    const api = createFakeApi();
    api.provisioningReads = 1_000;
    const project = await api.createProject({ name: "p", createDatabase: false });
    const ids = [];
    for (let i = 0; i < 250; i++) ids.push((await api.createDatabase({ projectId: project.id, name: `d${i}` })).id);
    const mirror = createRemoteMirror({
      api,
      logger: pino({ level: "silent" }),
      maxAgeMs: 60_000,
      fastMs: 0,
      onChange: () => {},
    });
    await mirror.ready();
    for (const id of ids.slice(0, 240)) api.databases.get(id)!.status = "ready";
    await mirror.refresh();
    // A provisioning database deleted remotely: the tail list does not see it, so the next list walks everything
    // (only a full list may conclude that something is gone).
    await api.deleteDatabase(ids[245]!);
    for (const k of Object.keys(api.calls)) delete api.calls[k];
    await Promise.all(ids.slice(240).map((id) => mirror.getDatabase(id)));
    expect(api.calls["listDatabases"]).toBe(1);
    await new Promise((r) => setTimeout(r, 2));
    await Promise.all(ids.slice(240).map((id) => mirror.getDatabase(id)));
    expect(api.calls["listDatabases"]).toBe(1 + 3);
    expect(mirror.peekDatabase(ids[245]!)).toBeUndefined();
    expect(mirror.peekDatabase(ids[246]!)?.status).toBe("provisioning");
  });

  describe("a burst of creates at the rate budget", () => {
    it("confirms 1,000 creates with at most 0.02 calls each, the resync due mid-burst waiting for its end", async () => {
      const run = await simulateBurst({ burst: 1_000, resyncMs: 60_000, resyncDueInBurstMs: 5_000 });
      expect(run.creates).toBe(1_000);
      expect(run.calls).toBeLessThanOrEqual(20);
      expect(run.byOp["listProjects"] ?? 0).toBe(0);
      // The last database Ready 800 ms after its create (the service's time) and at most a poll after that.
      expect(run.lastReadyAfterLastCreateMs).toBeLessThanOrEqual(2_000);
      // A database created mid-burst is seen Ready at most one burst list interval (7 s) after the service made it so.
      expect(run.maxSeenAfterServiceMs).toBeLessThanOrEqual(7_300);
      // The resync put off runs once the burst has been quiet for three fast intervals.
      await run.advance(4_000);
      expect(run.api.calls["listProjects"]).toBe(1);
    });

    it("puts a resync off for at most two resync intervals however long the creates keep coming, serving settled entries meanwhile", async () => {
      const run = await simulateBurst({ burst: 400, resyncMs: 10_000, resyncDueInBurstMs: 1_000, stopAtMs: 20_500 });
      expect(run.byOp["listProjects"] ?? 0).toBe(0);
      // Listed 29.5 s ago, past maxAgeMs (25 s): still served without a call while the resync is put off.
      const gets = run.api.calls["getDatabase"] ?? 0;
      for (const id of run.oldIds) expect((await run.mirror.getDatabase(id))?.status).toBe("ready");
      expect(run.api.calls["getDatabase"] ?? 0).toBe(gets);
      await run.advance(1_000);
      expect(run.resyncsAtMs).toEqual([21_000]);
    });

    it("still sees a lone create Ready within a poll of the service, and a small burst within two fast intervals", async () => {
      const lone = await simulateBurst({ burst: 1, resyncMs: 60_000, resyncDueInBurstMs: 30_000 });
      expect(lone.maxSeenAfterServiceMs).toBeLessThanOrEqual(500);
      const small = await simulateBurst({ burst: 20, resyncMs: 60_000, resyncDueInBurstMs: 30_000 });
      expect(small.maxSeenAfterServiceMs).toBeLessThanOrEqual(2_300);
    });
  });
});

/**
 * The operator as it runs a burst, with the mirror's own timers: creates at the rate budget (10/s), each created
 * database put into the mirror and observed again after its poll delay (or at once when a list sees it change); the
 * service settles each one 800 ms after its create (a spare pool, job polling). 150 older databases are listed
 * before, and the mirror's resync is due `resyncDueInBurstMs` into the burst. Calls are counted until every
 * database is Ready (as bench:operator does), besides the creates.
 */
async function simulateBurst(o: { burst: number; resyncMs: number; resyncDueInBurstMs: number; stopAtMs?: number }) {
  const settleMs = 800;
  const fastMs = 1_000;
  const api = createFakeApi();
  api.provisioningReads = 1_000_000;
  const project = await api.createProject({ name: "p", createDatabase: false });
  for (let i = 0; i < 150; i++) await api.createDatabase({ projectId: project.id, name: `old${i}` });
  for (const db of api.databases.values()) db.status = "ready";
  const oldIds = [...api.databases.keys()];
  vi.useFakeTimers({ toFake: ["Date", "setTimeout", "clearTimeout"] });
  const nextPoll = new Map<string, number>();
  const mirror = createRemoteMirror({
    api,
    logger: pino({ level: "silent" }),
    maxAgeMs: 2 * o.resyncMs + 5_000,
    fastMs,
    onChange: (_kind, id) => nextPoll.has(id) && nextPoll.set(id, Date.now()),
  });
  await mirror.ready();
  mirror.start(o.resyncMs);
  await vi.advanceTimersByTimeAsync(o.resyncMs - o.resyncDueInBurstMs);
  for (const k of Object.keys(api.calls)) delete api.calls[k];
  const resyncsAtMs: number[] = [];
  const start = Date.now();
  const listProjects = api.listProjects.bind(api);
  api.listProjects = (params) => {
    resyncsAtMs.push(Date.now() - start);
    return listProjects(params);
  };
  const created = new Map<string, number>();
  const readyAt = new Map<string, number>();
  let lastCreateAt = start;
  let maxSeenAfterServiceMs = 0;
  while (readyAt.size < o.burst && Date.now() - start < (o.stopAtMs ?? 600_000)) {
    if (created.size < o.burst) {
      const db = await api.createDatabase({ projectId: project.id, name: `new${created.size}` });
      created.set(db.id, Date.now());
      lastCreateAt = Date.now();
      mirror.putDatabase(db);
      nextPoll.set(db.id, Date.now() + Math.min(fastMs, pollDelayOf(db)));
    }
    for (const [id, at] of created) if (Date.now() - at >= settleMs) api.databases.get(id)!.status = "ready";
    const due = [...nextPoll].filter(([, at]) => at <= Date.now()).map(([id]) => id);
    await Promise.all(
      due.map(async (id) => {
        const known = mirror.peekDatabase(id);
        const db = await mirror.getDatabase(id, known?.status === "provisioning" ? pollDelayOf(known) : undefined);
        if (db?.status === "ready") {
          nextPoll.delete(id);
          readyAt.set(id, Date.now());
          maxSeenAfterServiceMs = Math.max(maxSeenAfterServiceMs, Date.now() - created.get(id)! - settleMs);
        } else if (db !== undefined) nextPoll.set(id, Date.now() + Math.min(fastMs, pollDelayOf(db)));
      }),
    );
    await vi.advanceTimersByTimeAsync(100);
  }
  const byOp = { ...api.calls };
  console.log(
    JSON.stringify({
      burst: o.burst,
      byOp,
      maxSeenAfterServiceMs,
      last: Math.max(...readyAt.values()) - lastCreateAt,
      resyncsAtMs,
    }),
  );
  const creates = byOp["createDatabase"] ?? 0;
  const calls = Object.entries(byOp)
    .filter(([op]) => op !== "createDatabase")
    .reduce((sum, [, n]) => sum + n, 0);
  return {
    api,
    mirror,
    oldIds,
    byOp,
    creates,
    calls,
    resyncsAtMs,
    lastReadyAfterLastCreateMs: Math.max(...readyAt.values()) - lastCreateAt,
    maxSeenAfterServiceMs,
    advance: (ms: number) => vi.advanceTimersByTimeAsync(ms),
  };
}
