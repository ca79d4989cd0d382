import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { boundIdOf, remoteIdOf } from "../../operator/identity.ts";
import {
  resolveCredentials,
  managedKind,
  parseOrTerminal,
  type KindContext,
  type ObjectCache,
} from "../../operator/kind.ts";
import type { KubeObject } from "../../kube/types.ts";
import type { ManagedKind } from "../../operator/managed-kind.ts";
import { DatabaseType } from "./schema.ts";
import { createDatabaseExternal, type DatabaseObject } from "./external.ts";
import { Database } from "./schema.ts";
import { managerOtherThan, seenWithOwnCredentials, wakeOtherClaimants } from "../adoption.ts";

// The Database kind: parsed by its schema, connected through its credentials and its project's remote id, woken when
// its project changes (it waits for the project's id).
// Adoption is exclusive (../adoption.ts): one Database resource manages a remote database; the others are refused.

const cloneSourceOf = (db: KubeObject): string | undefined =>
  (db["spec"] as { source?: { databaseRef?: { name?: string } } } | undefined)?.source?.databaseRef?.name;

/**
 * The clones of each source ("namespace/source" → clone names), per operator (its Database cache), kept from the
 * Database events themselves: every event passes through clonesToWake. Listing the namespace's Databases on every
 * Database event instead unpacked the whole cache each time: at 10,000 Databases, 10,000² unpacks, and an operator
 * that reconciled nothing for minutes after a start (bench/operator-rss.ts). A deleted clone's entry is dropped when
 * its source next changes (it is checked against the cache before it is woken).
 */
const cloneIndexes = new WeakMap<ObjectCache, { clones: Map<string, Set<string>>; sources: Map<string, string> }>();

function clonesToWake(changed: KubeObject, databases: ObjectCache): string[] {
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

export type DatabaseContext = Pick<KindContext, "pool" | "defaultCredentials" | "instanceId" | "cache">;

export function databaseKind(ctx: DatabaseContext): ManagedKind<DatabaseObject> {
  return {
    kind: "Database",
    type: DatabaseType,
    parse: (raw) => parseOrTerminal(Database, "Database", raw) as DatabaseObject,
    secretDatabaseIds: (obj) => [remoteIdOf(obj)].filter((id): id is string => id !== undefined),
    managerOtherThan: (obj) => managerOtherThan(ctx.cache("Database"), obj, seenWithOwnCredentials(ctx, "database")),
    async connect(obj) {
      const ns = obj.metadata.namespace ?? "default";
      let projectId = obj.spec.projectId;
      if (projectId === undefined && obj.spec.projectRef !== undefined) {
        const project = ctx.cache("Project").get(ns, obj.spec.projectRef.name);
        projectId = boundIdOf(project) ?? obj.status?.projectId;
        if (projectId === undefined) {
          throw new WaitingError(
            "ProjectNotReady",
            project === undefined
              ? `project "${obj.spec.projectRef.name}" not found in namespace "${ns}"`
              : `project "${obj.spec.projectRef.name}" has no remote id yet`,
          );
        }
      }
      if (projectId === undefined)
        throw new TerminalError("InvalidSpec", "set exactly one of projectRef.name or projectId");
      const api = await resolveCredentials(ctx, ns, obj.spec);
      if (remoteIdOf(obj) !== undefined) await api.mirror.ready();
      const external = createDatabaseExternal({
        api: api.api,
        mirror: api.mirror,
        instanceId: ctx.instanceId,
        projectId,
        databaseIdOf: (namespace, name) => boundIdOf(ctx.cache("Database").get(namespace, name)),
      });
      return { ...external, credentials: api.use };
    },
  };
}

export const databaseRegistration = managedKind(
  {
    kind: "Database",
    type: DatabaseType,
    wakeOn: [
      {
        kind: "Project",
        keys: (project, databases) =>
          databases
            .list(project.metadata.namespace ?? "")
            .filter(
              (db) =>
                db.metadata.namespace === project.metadata.namespace &&
                (db["spec"] as { projectRef?: { name: string } } | undefined)?.projectRef?.name ===
                  project.metadata.name,
            )
            .map((db) => `${db.metadata.namespace ?? ""}/${db.metadata.name}`),
      },
      wakeOtherClaimants("Database"),
      {
        // A clone waits for its source (SourceNotReady): woken when the source Database changes.
        kind: "Database",
        keys: (changed, databases) => clonesToWake(changed, databases),
      },
    ],
  },
  databaseKind,
);
