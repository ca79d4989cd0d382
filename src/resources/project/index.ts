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
  reasons: {
    DeletionBlocked: {
      condition: "Ready=False",
      argo: "Progressing",
      means:
        "A Project with `deletionPolicy: Delete` is not deleted: a Database with `deletionProtection: true` manages one of its databases (typically its default database, adopted with `externalId`), which would go with the project. Nothing was deleted.",
      fix: "Set that Database's `deletionProtection` to `false` (or delete it), or set the Project's `deletionPolicy` to `Retain`.",
    },
  },
  secretKeys: [],
  settings: {},
  controller: () => projectController,
  healthScript: conditionsHealthScript,
};
