import { oneShotHealthScript, type KindModule } from "../kind-module.ts";
import { restoreController } from "./controller.ts";
import { databaseRestoreDefinition } from "./schema.ts";

export const databaseRestoreModule: KindModule = {
  definition: databaseRestoreDefinition,
  controller: (settings) => restoreController(settings.restore),
  healthScript: oneShotHealthScript,
};
