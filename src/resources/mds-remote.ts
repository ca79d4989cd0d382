import { apiWrites } from "./index.ts";
import { mdsRemoteWith } from "./remote/remote-api.ts";

// Apart from the registry (index.ts), which the webhook and the CRD generator load without the service's client.

/** The service as the operator builds it per credential, with the registry's writes. */
export const mdsRemote = mdsRemoteWith(apiWrites());
