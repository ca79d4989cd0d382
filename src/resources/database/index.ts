import type { ResourceKind } from "../kind.ts";
import { databaseRegistration } from "./controller.ts";
import { databaseDefinition } from "./schema.ts";

export const databaseResource: ResourceKind = {
  definition: databaseDefinition,
  registration: () => databaseRegistration,
};
