import { createClient, type ClientOptions } from "../../client/index.ts";
import type { MdsApi } from "./mds-api.ts";
import type { RemoteDefinition } from "../../operator/credentials.ts";
import type { ControllerContext } from "../../operator/controller.ts";
import { createRemoteMirror, type RemoteMirror } from "./mirror.ts";

// The service as the kinds call it: the calls (MdsApi, mds-api.ts), the one client (src/client) that makes them,
// which of them write (refused by a replica that is not the leader) and the per-credential mirror the kinds share.
// src/operator builds one client and one mirror per credential from `mdsRemote` without knowing their methods.

export type { MdsApi };

/** What one credential gives the kinds: its client and its mirror (src/operator/credentials.ts builds both). */
export interface MdsRemote {
  api: MdsApi;
  mirror: RemoteMirror;
}

/** What a kind's controller code may use (src/operator/controller.ts), with this remote. */
export type MdsControllerContext = ControllerContext<MdsRemote>;

/**
 * The remote as src/operator builds it per credential; `writes`: every call that writes (the registry gathers them
 * from the kinds, src/resources/index.ts), which a replica that is not the leader refuses.
 */
export function mdsRemoteWith(writes: readonly string[]): RemoteDefinition<MdsRemote> {
  return { client: (options: ClientOptions) => createClient(options), writes, mirror: createRemoteMirror };
}
