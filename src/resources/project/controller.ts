import type { ManagedKind } from "../../operator/managed-reconciler.ts";
import { credentialsRefOf, parseOrTerminal, type KindDeps } from "../database/controller.ts";
import { ProjectType } from "../types.ts";
import { createProjectExternal, recordedProjectId, type ProjectObject } from "./external.ts";
import { Project } from "./schema.ts";

export function projectKind(deps: KindDeps): ManagedKind<ProjectObject> {
  return {
    kind: "Project",
    type: ProjectType,
    parse: (raw) => parseOrTerminal(Project, "Project", raw) as ProjectObject,
    async connect(obj) {
      const ctx = await deps.pool.resolve(credentialsRefOf(obj, deps));
      if (recordedProjectId(obj) !== undefined) await ctx.mirror.ready();
      return createProjectExternal({ api: ctx.api, mirror: ctx.mirror, instanceId: deps.instanceId });
    },
  };
}
