import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { backupController } from "./controller.ts";
import { databaseBackupDefinition } from "./schema.ts";

export const databaseBackupModule: MdsKindModule = {
  definition: databaseBackupDefinition,
  access: {
    verbs: ["get", "create", "delete"],
    why: "read live by name; a BackupSchedule creates one per slot and deletes those its retention drops",
  },
  deletionProtection: false,
  api: { reads: ["getDatabase", "listBackups"], writes: ["createBackup"] },
  reasons: {
    BackingUp: {
      condition: "DatabaseBackup `Ready=False`",
      argo: "Progressing",
      means: "A DatabaseBackup's backup was requested; the operator follows it.",
      fix: "Wait for its phase ([backups.md](backups.md)).",
    },
  },
  controller: () => backupController(),
  healthScript: oneShotHealthScript,
};
