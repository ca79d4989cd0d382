import type { RestoreSettings } from "./database-restore/controller.ts";
import type { KindModule } from "./kit/kind-module.ts";
import type { MdsRemote } from "./remote/remote-api.ts";

/** Settings of the controllers that have any (from `mds operator` flags). */
export interface ControllerSettings {
  restore?: RestoreSettings | undefined;
}

/** A kind of mds: its controller calls the Managed Database Service API (remote/) and takes mds's settings. */
export type MdsKindModule = KindModule<MdsRemote, ControllerSettings>;
