import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { projectController } from "./controller.ts";
import { projectDefinition } from "./schema.ts";

export const projectModule: MdsKindModule = {
  definition: projectDefinition,
  access: {
    verbs: ["get", "patch"],
    why: "finalizer and annotations by merge patch; read by name when a write found it gone",
  },
  deletionProtection: true,
  api: { reads: ["listProjects", "listDatabases"], writes: ["createProject", "deleteProject", "deleteDatabase"] },
  controller: () => projectController,
  healthScript: conditionsHealthScript,
};
