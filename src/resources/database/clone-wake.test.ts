import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../kube/types.ts";
import type { ObjectCache } from "../../operator/controller.ts";
import { databaseController } from "./controller.ts";

// The clone wake (a source Database's change wakes its clones) answers from an index kept from the Database events,
// never by listing the cache: listing unpacked every cached Database on every Database event (10,000² at 10,000).

const db = (name: string, source?: string): KubeObject => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: "ns" },
  spec: {
    projectRef: { name: "p" },
    ...(source === undefined ? {} : { source: { type: "database", databaseRef: { name: source } } }),
  },
});

function cacheOf(objects: Map<string, KubeObject>): ObjectCache {
  return {
    get: (ns, name) => objects.get(`${ns ?? ""}/${name}`),
    list: () => {
      throw new Error("the clone wake must not list the cache");
    },
  };
}

const cloneWake = databaseController.wakeOn!.filter((w) => w.kind === "Database").at(-1)!;

describe("the clone wake", () => {
  it("wakes the clones of the changed source only, from the events it saw, without listing", () => {
    const objects = new Map<string, KubeObject>();
    const cache = cacheOf(objects);
    for (const o of [db("src"), db("c1", "src"), db("c2", "src"), db("other"), db("c3", "other")]) {
      objects.set(`ns/${o.metadata.name}`, o);
      cloneWake.keys(o, cache);
    }
    expect(cloneWake.keys(db("src"), cache).sort()).toEqual(["ns/c1", "ns/c2"]);
    expect(cloneWake.keys(db("other"), cache)).toEqual(["ns/c3"]);
    expect(cloneWake.keys(db("c1", "src"), cache)).toEqual([]);
  });

  it("forgets a clone that was deleted or now names another source", () => {
    const objects = new Map<string, KubeObject>();
    const cache = cacheOf(objects);
    for (const o of [db("src"), db("c1", "src"), db("c2", "src")]) {
      objects.set(`ns/${o.metadata.name}`, o);
      cloneWake.keys(o, cache);
    }
    objects.delete("ns/c1");
    cloneWake.keys(db("c1", "src"), cache); // its delete event
    const moved = db("c2", "elsewhere");
    objects.set("ns/c2", moved);
    cloneWake.keys(moved, cache);
    expect(cloneWake.keys(db("src"), cache)).toEqual([]);
    expect(cloneWake.keys(db("elsewhere"), cache)).toEqual(["ns/c2"]);
  });

  it("keeps one index per operator (its cache): another operator's clones are not woken", () => {
    const a = new Map<string, KubeObject>([["ns/c1", db("c1", "src")]]);
    const b = new Map<string, KubeObject>();
    cloneWake.keys(db("c1", "src"), cacheOf(a));
    expect(cloneWake.keys(db("src"), cacheOf(b))).toEqual([]);
  });
});
