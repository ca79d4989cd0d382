import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { databaseController } from "./controller.ts";
import { databaseDefinition } from "./schema.ts";

export const databaseModule: MdsKindModule = {
  definition: databaseDefinition,
  controller: () => databaseController,
  healthScript: conditionsHealthScript,
};
