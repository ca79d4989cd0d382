import type { ResourceKind } from "../kind.ts";
import { restoreRegistration } from "./controller.ts";
import { databaseRestoreDefinition } from "./schema.ts";

export const databaseRestoreResource: ResourceKind = {
  definition: databaseRestoreDefinition,
  registration: (settings) => restoreRegistration(settings.restore),
};
