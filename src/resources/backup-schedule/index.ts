import { conditionsHealthScript, type KindModule } from "../kind-module.ts";
import { scheduleController } from "./controller.ts";
import { backupScheduleDefinition } from "./schema.ts";

export const backupScheduleModule: KindModule = {
  definition: backupScheduleDefinition,
  controller: () => scheduleController(),
  healthScript: conditionsHealthScript,
};
