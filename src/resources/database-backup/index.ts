import { oneShotHealthScript, type KindModule } from "../kind-module.ts";
import { backupController } from "./controller.ts";
import { databaseBackupDefinition } from "./schema.ts";

export const databaseBackupModule: KindModule = {
  definition: databaseBackupDefinition,
  controller: () => backupController(),
  healthScript: oneShotHealthScript,
};
