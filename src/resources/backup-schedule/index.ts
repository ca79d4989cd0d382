import type { ResourceKind } from "../kind.ts";
import { scheduleRegistration } from "./controller.ts";
import { backupScheduleDefinition } from "./schema.ts";

export const backupScheduleResource: ResourceKind = {
  definition: backupScheduleDefinition,
  registration: () => scheduleRegistration(),
};
