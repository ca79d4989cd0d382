import { connectionSecretKeys } from "../../operator/secret/render.ts";
import { databaseReasons } from "./reasons.ts";
import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { databaseController } from "./controller.ts";
import { databaseDefinition } from "./schema.ts";

export const databaseModule: MdsKindModule = {
  definition: databaseDefinition,
  access: {
    verbs: ["get", "patch"],
    why: "finalizer and annotations by merge patch; read by name where a restore needs its target live",
  },
  deletionProtection: true,
  api: {
    reads: ["getDatabase", "listDatabases", "listBranches", "listBackups"],
    writes: ["createDatabase", "updateDatabase", "deleteDatabase", "createBranch", "deleteBranch"],
  },
  reasons: databaseReasons,
  secretKeys: connectionSecretKeys,
  settings: {},
  controller: () => databaseController,
  healthScript: conditionsHealthScript,
};
