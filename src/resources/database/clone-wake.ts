import type { KubeObject } from "../../kube/types.ts";
import type { ObjectCache } from "../../operator/controller.ts";
import { readDatabase } from "./read.ts";

// A clone waits for its source (SourceNotReady) and is woken when the source Database changes: which clones a
// change wakes.

/**
 * The source a Database clones by reference, read with the Database schema. Most Databases clone nothing: those are
 * not parsed (every Database event passes here; parsing each of 10,000 listed at a start took half a second).
 */
const cloneSourceOf = (db: KubeObject): string | undefined =>
  (db["spec"] as { source?: unknown } | undefined)?.source === undefined
    ? undefined
    : readDatabase(db)?.spec.source?.databaseRef?.name;

/**
 * The clones of each source ("namespace/source" → clone names), per operator (its Database cache), kept from the
 * Database events themselves: every event passes through clonesToWake. Listing the namespace's Databases on every
 * Database event instead unpacked the whole cache each time: at 10,000 Databases, 10,000² unpacks, and an operator
 * that reconciled nothing for minutes after a start (bench/operator-rss.ts). A deleted clone's entry is dropped when
 * its source next changes (it is checked against the cache before it is woken).
 */
const cloneIndexes = new WeakMap<ObjectCache, { clones: Map<string, Set<string>>; sources: Map<string, string> }>();

export function clonesToWake(changed: KubeObject, databases: ObjectCache): string[] {
  let index = cloneIndexes.get(databases);
  if (index === undefined) cloneIndexes.set(databases, (index = { clones: new Map(), sources: new Map() }));
  const ns = changed.metadata.namespace ?? "";
  const key = `${ns}/${changed.metadata.name}`;
  const source = cloneSourceOf(changed);
  const before = index.sources.get(key);
  if (before !== source) {
    if (before !== undefined) index.clones.get(`${ns}/${before}`)?.delete(changed.metadata.name);
    if (before !== undefined && index.clones.get(`${ns}/${before}`)?.size === 0) index.clones.delete(`${ns}/${before}`);
    if (source === undefined) index.sources.delete(key);
    else {
      index.sources.set(key, source);
      let set = index.clones.get(`${ns}/${source}`);
      if (set === undefined) index.clones.set(`${ns}/${source}`, (set = new Set()));
      set.add(changed.metadata.name);
    }
  }
  const clones = index.clones.get(key);
  if (clones === undefined) return [];
  const wake: string[] = [];
  for (const name of clones) {
    const clone = databases.get(ns, name);
    if (clone !== undefined && cloneSourceOf(clone) === changed.metadata.name) wake.push(`${ns}/${name}`);
    else {
      clones.delete(name);
      index.sources.delete(`${ns}/${name}`);
    }
  }
  if (clones.size === 0) index.clones.delete(key);
  return wake;
}
