import type { MdsApi } from "./mds-api.ts";

/**
 * The calls every kind shares, made outside the kinds' folders: the mirror's lists and reads (./mirror.ts) and the
 * Secret component's mints and revocations (src/operator/secret). The kinds declare their own in their modules.
 */
export const sharedApiCalls = {
  reads: ["listProjects", "getProject", "listDatabases", "getDatabase", "getConnection"],
  writes: ["createConnection", "deleteConnection"],
} as const satisfies { reads: readonly (keyof MdsApi)[]; writes: readonly (keyof MdsApi)[] };
