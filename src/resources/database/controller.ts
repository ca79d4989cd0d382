import { branchCreated } from "./branch.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { boundIdOf, remoteIdOf } from "../../operator/identity.ts";
import { acceptedDatabaseIdIfAny } from "../remote/accepted-database.ts";
import { resolveCredentials, managedController, parseOrTerminal } from "../../operator/controller.ts";
import type { ManagedHandler } from "../../operator/managed-handler.ts";
import { DatabaseType } from "./schema.ts";
import { readDatabase } from "./read.ts";
import { clonesToWake } from "./clone-wake.ts";
import { ProjectType } from "../types.ts";
import { createDatabaseExternal, type DatabaseObject } from "./external.ts";
import { Database } from "./schema.ts";
import { remoteDatabaseStallingReasons } from "../remote/database.ts";
import { expiryOf } from "./expiry.ts";
import { managerOtherThan, seenWithOwnCredentials, wakeOtherClaimants } from "../remote/adoption.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";
import { backupAgeGauges, backupTracking } from "./latest-backup.ts";

// The Database kind: parsed by its schema, connected through its credentials and its project's remote id, woken when
// its project changes (it waits for the project's id).
// Adoption is exclusive (../adoption.ts): one Database resource manages a remote database; the others are refused.

type DatabaseContext = Pick<MdsControllerContext, "pool" | "defaultCredentials" | "instanceId" | "cache" | "accepted"> &
  Partial<Pick<MdsControllerContext, "crashPoint" | "pollIntervals">>;

export function databaseHandler(ctx: DatabaseContext): ManagedHandler<DatabaseObject> {
  return {
    kind: "Database",
    type: DatabaseType,
    parse: (raw) => parseOrTerminal(Database, "Database", raw) as DatabaseObject,
    secretDatabaseIds: (obj) => [remoteIdOf(obj)].filter((id): id is string => id !== undefined),
    expiry: (obj, now) => expiryOf(obj.spec, obj.metadata.creationTimestamp, obj.status, now),
    managerOtherThan: (obj) =>
      managerOtherThan(ctx.cache(DatabaseType.kind), obj, seenWithOwnCredentials(ctx, "database"), (db) =>
        ctx.accepted.idOf(DatabaseType.kind, db),
      ),
    async connect(obj) {
      const ns = obj.metadata.namespace ?? "default";
      let projectId = obj.spec.projectId;
      if (projectId === undefined && obj.spec.projectRef !== undefined) {
        const project = ctx.cache(ProjectType.kind).get(ns, obj.spec.projectRef.name);
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
        // A clone's source: the id its own loop accepted (accepted.ts), never its status alone.
        databaseIdOf: (namespace, name) =>
          acceptedDatabaseIdIfAny(ctx.accepted, ctx.cache(DatabaseType.kind).get(namespace, name), { namespace, name }),
        acceptedIdOf: (db) => ctx.accepted.idOf(DatabaseType.kind, db),
        crashPoint: ctx.crashPoint ?? (() => {}),
        backupTracking: (db) => backupTracking(ctx.cache, ctx.pollIntervals?.slowMs)(db),
      });
      return { ...external, credentials: api.use };
    },
  };
}

export const databaseController = managedController(
  {
    kind: "Database",
    type: DatabaseType,
    stallingReasons: [...remoteDatabaseStallingReasons, "BranchRoleMismatch"],
    // Its own: spec.branch's branch was created; the database not yet (./branch.ts).
    crashPoints: [branchCreated],
    // How long each Database has gone without a backup (status.latestBackup), for the alert.
    objectGauges: backupAgeGauges,
    wakeOn: [
      {
        kind: ProjectType.kind,
        keys: (project, databases) =>
          databases
            .list(project.metadata.namespace ?? "")
            .filter(
              (db) =>
                db.metadata.namespace === project.metadata.namespace &&
                readDatabase(db)?.spec.projectRef?.name === project.metadata.name,
            )
            .map((db) => `${db.metadata.namespace ?? ""}/${db.metadata.name}`),
      },
      wakeOtherClaimants("Database"),
      {
        // A preview waits for its project's production branch (NoProductionBranch): woken when a Database of the same
        // namespace on a production branch changes (the one that creates it, usually).
        kind: "Database",
        keys: (production, databases) =>
          (production["spec"] as { branch?: { role?: string } } | undefined)?.branch?.role !== "production"
            ? []
            : databases
                .list(production.metadata.namespace ?? "")
                .filter(
                  (db) =>
                    db.metadata.namespace === production.metadata.namespace &&
                    (db["spec"] as { branch?: { role?: string } } | undefined)?.branch?.role === "preview",
                )
                .map((db) => `${db.metadata.namespace ?? ""}/${db.metadata.name}`),
      },
      {
        // A clone waits for its source (SourceNotReady): woken when the source Database changes.
        kind: "Database",
        keys: (changed, databases) => clonesToWake(changed, databases),
      },
      {
        // A DatabaseBackup that succeeded (it forgot the database's cached list): status.latestBackup now, not at
        // the next resync.
        kind: "DatabaseBackup",
        keys: (backup) => {
          const b = backup as { spec?: { databaseRef?: { name?: string } }; status?: { phase?: string } };
          const name = b.spec?.databaseRef?.name;
          return b.status?.phase === "Succeeded" && name !== undefined
            ? [`${backup.metadata.namespace ?? ""}/${name}`]
            : [];
        },
      },
    ],
  },
  databaseHandler,
);
