import { remoteIdOf } from "../../operator/identity.ts";
import { resolveCredentials, managedKind, parseOrTerminal, type KindContext } from "../../operator/kind.ts";
import type { ManagedKind } from "../../operator/managed-kind.ts";
import { ProjectType } from "./schema.ts";
import { createProjectExternal, type ProjectObject } from "./external.ts";
import { Project } from "./schema.ts";
import { managerOtherThan, protectingDatabaseOf, seenWithOwnCredentials, wakeOtherClaimants } from "../adoption.ts";

// The Project kind: parsed by its schema, connected through its credentials; its Secret is its default database's.
// Adoption is exclusive (../adoption.ts): one Project resource manages a remote project; the others are refused.

export function projectKind(
  ctx: Pick<KindContext, "pool" | "defaultCredentials" | "instanceId" | "cache">,
): ManagedKind<ProjectObject> {
  return {
    kind: "Project",
    type: ProjectType,
    parse: (raw) => parseOrTerminal(Project, "Project", raw) as ProjectObject,
    secretDatabaseIds: (obj) => [obj.status?.defaultDatabase?.id].filter((id): id is string => id !== undefined),
    managerOtherThan: (obj) => managerOtherThan(ctx.cache("Project"), obj, seenWithOwnCredentials(ctx, "project")),
    async connect(obj) {
      const api = await resolveCredentials(ctx, obj.metadata.namespace ?? "default", obj.spec);
      if (remoteIdOf(obj) !== undefined) await api.mirror.ready();
      // A protected Database that adopted one of the project's databases (its default one) holds the deletion.
      const protectedBy = (databaseId: string) =>
        protectingDatabaseOf(ctx.cache("Database"), databaseId, seenWithOwnCredentials(ctx, "database"));
      return {
        ...createProjectExternal({ api: api.api, mirror: api.mirror, instanceId: ctx.instanceId, protectedBy }),
        credentials: api.use,
      };
    },
  };
}

export const projectRegistration = managedKind(
  { kind: "Project", type: ProjectType, wakeOn: [wakeOtherClaimants("Project")] },
  projectKind,
);
