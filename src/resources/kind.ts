import type { KindRegistration } from "../operator/kind.ts";
import type { KindDefinition } from "./crd.ts";
import type { RestoreSettings } from "./database-restore/controller.ts";

/** Settings of the kinds that have any (from `mds operator` flags). */
export interface KindSettings {
  restore?: RestoreSettings | undefined;
}

/** One kind, as its folder's index.ts exports it: its CRD definition and its registration with the operator. */
export interface ResourceKind {
  definition: KindDefinition;
  registration(settings: KindSettings): KindRegistration;
}
