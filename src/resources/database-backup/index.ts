import type { ResourceKind } from "../kind.ts";
import { backupRegistration } from "./controller.ts";
import { databaseBackupDefinition } from "./schema.ts";

export const databaseBackupResource: ResourceKind = {
  definition: databaseBackupDefinition,
  registration: () => backupRegistration(),
};
