import type { ResourceKind } from "../kind.ts";
import { projectRegistration } from "./controller.ts";
import { projectDefinition } from "./schema.ts";

export const projectResource: ResourceKind = { definition: projectDefinition, registration: () => projectRegistration };
