import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { projectController } from "./controller.ts";
import { projectDefinition } from "./schema.ts";

export const projectModule: MdsKindModule = {
  definition: projectDefinition,
  controller: () => projectController,
  healthScript: conditionsHealthScript,
};
