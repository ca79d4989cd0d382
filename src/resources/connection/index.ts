import type { ResourceKind } from "../kind.ts";
import { connectionRegistration } from "./controller.ts";
import { connectionDefinition } from "./schema.ts";

export const connectionResource: ResourceKind = {
  definition: connectionDefinition,
  registration: () => connectionRegistration,
};
