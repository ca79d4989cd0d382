import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { backupController, type BackupSettings } from "./controller.ts";
import { replayWindowSetting } from "../remote/replay-window.ts";
import { databaseBackupDefinition } from "./schema.ts";

export const databaseBackupModule: MdsKindModule<BackupSettings> = {
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
  secretKeys: [],
  settings: { replayWindowMs: replayWindowSetting("backup") },
  controller: (settings) => backupController(settings),
  healthScript: oneShotHealthScript,
};
