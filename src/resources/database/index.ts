import { conditionsHealthScript, type KindModule } from "../kind-module.ts";
import { databaseController } from "./controller.ts";
import { databaseDefinition } from "./schema.ts";

export const databaseModule: KindModule = {
  definition: databaseDefinition,
  controller: () => databaseController,
  healthScript: conditionsHealthScript,
};
