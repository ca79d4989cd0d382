import type { MdsKindModule } from "../mds-kind.ts";
import { oneShotHealthScript } from "../kit/kind-module.ts";
import { restoreController } from "./controller.ts";
import { databaseRestoreDefinition } from "./schema.ts";

export const databaseRestoreModule: MdsKindModule = {
  definition: databaseRestoreDefinition,
  access: {
    verbs: ["get"],
    why: "read live by name (a restore runs once); no finalizer, so never patched: only its status",
  },
  deletionProtection: false,
  api: { reads: ["getDatabase", "listBackups"], writes: ["restoreDatabase"] },
  reasons: {},
  controller: (settings) => restoreController(settings.restore),
  healthScript: oneShotHealthScript,
};
