import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { connectionController } from "./controller.ts";
import { connectionDefinition } from "./schema.ts";

export const connectionModule: MdsKindModule = {
  definition: connectionDefinition,
  controller: () => connectionController,
  healthScript: conditionsHealthScript,
};
