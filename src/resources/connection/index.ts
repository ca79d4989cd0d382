import { connectionSecretKeys } from "../../operator/secret/render.ts";
import type { MdsKindModule } from "../mds-kind.ts";
import { conditionsHealthScript } from "../kit/kind-module.ts";
import { connectionController } from "./controller.ts";
import { connectionDefinition } from "./schema.ts";

export const connectionModule: MdsKindModule = {
  definition: connectionDefinition,
  access: {
    verbs: ["get", "patch"],
    why: "finalizer and annotations by merge patch; read by name when a write found it gone",
  },
  deletionProtection: true,
  api: { reads: ["getDatabase"], writes: [] },
  reasons: {},
  secretKeys: connectionSecretKeys,
  settings: {},
  controller: () => connectionController,
  healthScript: conditionsHealthScript,
};
