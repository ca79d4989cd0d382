import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createRemoteMirror } from "./remote-mirror.ts";
import { createFakeApi } from "../../test/support/fake-api.ts";

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
});
