import { conditionsHealthScript, type KindModule } from "../kind-module.ts";
import { projectController } from "./controller.ts";
import { projectDefinition } from "./schema.ts";

export const projectModule: KindModule = {
  definition: projectDefinition,
  controller: () => projectController,
  healthScript: conditionsHealthScript,
};
