import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { backupController } from "./controller.ts";
import { databaseBackupDefinition } from "./schema.ts";

export const databaseBackupModule: MdsKindModule = {
  definition: databaseBackupDefinition,
  controller: () => backupController(),
  healthScript: oneShotHealthScript,
};
