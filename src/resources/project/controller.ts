import { remoteIdOf } from "../../operator/identity.ts";
import { resolveCredentials, managedController, parseOrTerminal } from "../../operator/controller.ts";
import type { ManagedHandler } from "../../operator/managed-handler.ts";
import { ProjectType } from "./schema.ts";
import { DatabaseType } from "../types.ts";
import { readDatabase } from "../database/read.ts";
import { createProjectExternal, type ProjectObject } from "./external.ts";
import { Project } from "./schema.ts";
import { remoteDatabaseStallingReasons } from "../remote/database.ts";
import {
  managerOtherThan,
  protectingDatabaseOf,
  seenWithOwnCredentials,
  wakeOtherClaimants,
} from "../remote/adoption.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";

// The Project kind: parsed by its schema, connected through its credentials; its Secret is its default database's.
// Adoption is exclusive (../adoption.ts): one Project resource manages a remote project; the others are refused.

export function projectHandler(
  ctx: Pick<MdsControllerContext, "pool" | "defaultCredentials" | "instanceId" | "cache"> &
    Partial<Pick<MdsControllerContext, "accepted">>,
): ManagedHandler<ProjectObject> {
  return {
    kind: "Project",
    type: ProjectType,
    parse: (raw) => parseOrTerminal(Project, "Project", raw) as ProjectObject,
    secretDatabaseIds: (obj) => [obj.status?.defaultDatabase?.id].filter((id): id is string => id !== undefined),
    managerOtherThan: (obj) =>
      managerOtherThan(ctx.cache(ProjectType.kind), obj, seenWithOwnCredentials(ctx, "project")),
    async connect(obj) {
      const api = await resolveCredentials(ctx, obj.metadata.namespace ?? "default", obj.spec);
      if (remoteIdOf(obj) !== undefined) await api.mirror.ready();
      // A protected Database that adopted one of the project's databases (its default one) holds the deletion.
      const protectedBy = (databaseId: string) =>
        protectingDatabaseOf(
          ctx.cache(DatabaseType.kind),
          databaseId,
          seenWithOwnCredentials(ctx, "database"),
          (db) => readDatabase(db)?.spec.deletionProtection === true,
        );
      return {
        ...createProjectExternal({
          api: api.api,
          mirror: api.mirror,
          instanceId: ctx.instanceId,
          protectedBy,
          // What this loop accepted needs no lookup to prove again (../../operator/accepted.ts).
          acceptedIdOf: (project) => ctx.accepted?.idOf(ProjectType.kind, project),
        }),
        credentials: api.use,
      };
    },
  };
}

export const projectController = managedController(
  {
    kind: "Project",
    type: ProjectType,
    wakeOn: [wakeOtherClaimants("Project")],
    // A project has nothing the loop updates remotely.
    steps: ["create", "secret", "rotate", "delete"],
    // Its default database's failure.
    stallingReasons: remoteDatabaseStallingReasons,
  },
  projectHandler,
);
