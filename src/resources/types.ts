// Addresses of the kinds for the kube layer; each is defined beside its schema.
export { ProjectType } from "./project/schema.ts";
export { DatabaseType } from "./database/schema.ts";
export { DatabaseRestoreType } from "./database-restore/schema.ts";
export { ConnectionType } from "./connection/schema.ts";
