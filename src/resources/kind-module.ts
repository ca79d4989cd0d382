import type { Controller } from "../operator/controller.ts";
import type { RemoteState } from "../operator/credentials.ts";
import type { CrdDefinition } from "./crd.ts";
import type { RestoreSettings } from "./database-restore/controller.ts";
import type { MdsRemote } from "./remote-api.ts";

/** Settings of the controllers that have any (from `mds operator` flags). */
export interface ControllerSettings {
  restore?: RestoreSettings | undefined;
}

/**
 * One kind, as its folder's index.ts exports it: everything the rest of the repository needs to know about it. `R`:
 * what its controller calls (the service's MdsApi and mirror, src/resources/remote-api.ts).
 */
export interface KindModule<R extends RemoteState = MdsRemote> {
  /** Its CRD: names, schema, printer columns (`npm run crds`). */
  definition: CrdDefinition;
  /** What the operator runs for it: the loop with the kind's handler, its crash points and stalling reasons. */
  controller(settings: ControllerSettings): Controller<R>;
  /**
   * Its Argo CD health check (Lua): `conditionsHealthScript` for a kind whose objects say Ready/Synced/Stalled, or
   * one of its own beside it. `npm run argocd-cm` copies it to deploy/argocd/resource_customizations/mds.dev/<Kind>/.
   */
  healthScript: URL;
}

/** The health check of every kind whose Ready, Synced, Reconciling and Stalled conditions say it all. */
export const conditionsHealthScript = new URL("./health.lua", import.meta.url);

/** The health check of the one-shot kinds (a restore, a backup): their phase says it all. */
export const oneShotHealthScript = new URL("./one-shot-health.lua", import.meta.url);
