import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { scheduleController } from "./controller.ts";
import { backupScheduleDefinition } from "./schema.ts";

export const backupScheduleModule: MdsKindModule = {
  definition: backupScheduleDefinition,
  controller: () => scheduleController(),
  healthScript: conditionsHealthScript,
};
