import type { KindModule } from "./kit/kind-module.ts";
import type { MdsRemote } from "./remote/remote-api.ts";

/**
 * A kind of mds: its controller calls the Managed Database Service API (remote/). `S`: the settings it declares
 * (none by default); the registry holds every kind whatever its settings.
 */
export type MdsKindModule<S = Record<string, never>> = KindModule<MdsRemote, S>;

/** The settings of every kind, by kind, as `mds operator` parsed them (src/cli/operator-config.ts). */
export type KindSettingValues = Readonly<Record<string, Readonly<Record<string, unknown>>>>;
