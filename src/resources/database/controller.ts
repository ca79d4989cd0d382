import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { boundIdOf, remoteIdOf } from "../../operator/identity.ts";
import { resolveCredentials, managedKind, parseOrTerminal, type KindContext } from "../../operator/kind.ts";
import type { ManagedKind } from "../../operator/managed-kind.ts";
import { DatabaseType } from "./schema.ts";
import { createDatabaseExternal, type DatabaseObject } from "./external.ts";
import { Database } from "./schema.ts";
import { managerOtherThan, seenWithOwnCredentials, wakeOtherClaimants } from "../adoption.ts";
import { backupTracking } from "../database-backup/latest.ts";

// The Database kind: parsed by its schema, connected through its credentials and its project's remote id, woken when
// its project changes (it waits for the project's id).
// Adoption is exclusive (../adoption.ts): one Database resource manages a remote database; the others are refused.

export type DatabaseContext = Pick<KindContext, "pool" | "defaultCredentials" | "instanceId" | "cache"> &
  Partial<Pick<KindContext, "pollIntervals">>;

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
        backupTracking: (db) => backupTracking(ctx.cache, ctx.pollIntervals?.slowMs)(db),
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
        keys: (source, databases) =>
          databases
            .list(source.metadata.namespace ?? "")
            .filter(
              (db) =>
                db.metadata.namespace === source.metadata.namespace &&
                (db["spec"] as { source?: { type?: string; databaseRef?: { name: string } } } | undefined)?.source
                  ?.databaseRef?.name === source.metadata.name,
            )
            .map((db) => `${db.metadata.namespace ?? ""}/${db.metadata.name}`),
      },
    ],
  },
  databaseKind,
);
