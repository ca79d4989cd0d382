import { conditionsHealthScript, type KindModule } from "../kind-module.ts";
import { connectionController } from "./controller.ts";
import { connectionDefinition } from "./schema.ts";

export const connectionModule: KindModule = {
  definition: connectionDefinition,
  controller: () => connectionController,
  healthScript: conditionsHealthScript,
};
