import type { Controller } from "../operator/controller.ts";
import type { CrdDefinition } from "./crd.ts";
import type { RestoreSettings } from "./database-restore/controller.ts";

/** Settings of the controllers that have any (from `mds operator` flags). */
export interface ControllerSettings {
  restore?: RestoreSettings | undefined;
}

/** One kind, as its folder's index.ts exports it: everything the rest of the repository needs to know about it. */
export interface KindModule {
  /** Its CRD: names, schema, printer columns (`npm run crds`). */
  definition: CrdDefinition;
  /** What the operator runs for it: the loop with the kind's handler, its crash points and stalling reasons. */
  controller(settings: ControllerSettings): Controller;
  /**
   * Its Argo CD health check (Lua): `conditionsHealthScript` for a kind whose objects say Ready/Synced/Stalled, or
   * one of its own beside it. `npm run argocd-cm` copies it to deploy/argocd/resource_customizations/mds.dev/<Kind>/.
   */
  healthScript: URL;
}

/** The health check of every kind whose Ready, Synced, Reconciling and Stalled conditions say it all. */
export const conditionsHealthScript = new URL("./health.lua", import.meta.url);
