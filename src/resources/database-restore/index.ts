import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { restoreController } from "./controller.ts";
import { databaseRestoreDefinition } from "./schema.ts";

export const databaseRestoreModule: MdsKindModule = {
  definition: databaseRestoreDefinition,
  controller: (settings) => restoreController(settings.restore),
  healthScript: oneShotHealthScript,
};
