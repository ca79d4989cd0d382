import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { scheduleController } from "./controller.ts";
import { backupScheduleDefinition } from "./schema.ts";

export const backupScheduleModule: MdsKindModule = {
  definition: backupScheduleDefinition,
  access: {
    verbs: ["get"],
    why: "read live by name; no finalizer, so never patched: only its status",
  },
  deletionProtection: false,
  api: { reads: ["getDatabase", "listBackups"], writes: ["deleteBackup"] },
  controller: () => scheduleController(),
  healthScript: conditionsHealthScript,
};
