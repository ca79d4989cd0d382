import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { restoreController, type RestoreSettings } from "./controller.ts";
import { replayWindowSetting } from "../remote/replay-window.ts";
import { databaseRestoreDefinition } from "./schema.ts";

export const databaseRestoreModule: MdsKindModule<RestoreSettings> = {
  definition: databaseRestoreDefinition,
  access: {
    verbs: ["get"],
    why: "read live by name (a restore runs once); no finalizer, so never patched: only its status",
  },
  deletionProtection: false,
  api: { reads: ["getDatabase", "listBackups"], writes: ["restoreDatabase"] },
  reasons: {},
  secretKeys: [],
  settings: { replayWindowMs: replayWindowSetting("restore") },
  controller: (settings) => restoreController(settings),
  healthScript: oneShotHealthScript,
};
