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
  reasons: {
    Scheduled: {
      condition: "BackupSchedule `Ready=True`",
      argo: "Healthy",
      means: "The schedule is active; `status.nextScheduleTime` is its next slot.",
      fix: "Nothing.",
    },
    Suspended: {
      condition: "BackupSchedule `Ready=True`",
      argo: "Healthy",
      means: "`spec.suspend` is true: no new backups; retention still runs.",
      fix: "Set `suspend: false` to resume (a slot missed meanwhile is not taken).",
    },
  },
  secretKeys: [],
  settings: {},
  controller: () => scheduleController(),
  healthScript: conditionsHealthScript,
};
