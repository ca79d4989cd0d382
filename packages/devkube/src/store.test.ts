import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Store } from "./store.ts";

const dirs: string[] = [];
const fresh = () => {
  const d = mkdtempSync(path.join(tmpdir(), "devkube-store-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const cm = (name: string) => ({ metadata: { name, namespace: "default" } });

describe("Store", () => {
  it("judges 'too old' per storage key", () => {
    const s = new Store(fresh(), 2);
    s.write("/configmaps", cm("a"));
    const rvQuiet = s.currentRv();
    for (const n of ["b", "c", "d", "e"]) s.write("/secrets", cm(n));
    expect(s.eventsSince("/configmaps", rvQuiet)).toEqual([]);
    expect(s.eventsSince("/secrets", rvQuiet)).toBe("expired");
    expect(s.eventsSince("/secrets", s.currentRv() - 2)).toHaveLength(2);
    s.close();
  });

  it("replays the journal after a crash, ignoring a torn last line, and keeps the RV moving forward", () => {
    const dir = fresh();
    const s = new Store(dir, 10);
    s.write("/configmaps", cm("a"));
    s.write("/configmaps", cm("b"));
    s.remove("/configmaps", "default", "b");
    const rv = s.currentRv();
    s.close();
    appendFileSync(path.join(dir, "objects.jsonl"), '{"rv":99,"k":"/configmaps","o":{"metad');
    const again = new Store(dir, 10);
    expect(again.list("/configmaps").map((o) => (o["metadata"] as { name: string }).name)).toEqual(["a"]);
    expect(again.currentRv()).toBe(rv);
    expect(again.eventsSince("/configmaps", rv - 1)).toBe("expired");
    again.close();
  });

  it("compacts the journal online when updates far outnumber the live objects", () => {
    const dir = fresh();
    const s = new Store(dir, 10);
    for (let i = 0; i < 6000; i++)
      s.write("/leases", { metadata: { name: "leader", namespace: "default" }, spec: { renew: i } });
    const rv = s.currentRv();
    s.close();
    const lines = readFileSync(path.join(dir, "objects.jsonl"), "utf8").trim().split("\n");
    expect(lines.length).toBeLessThan(2000);
    const again = new Store(dir, 10);
    expect(again.get("/leases", "default", "leader")?.["spec"]).toEqual({ renew: 5999 });
    expect(again.currentRv()).toBe(rv);
    again.close();
  });
});
