// Addresses of the kinds for the kube layer; each is defined beside its schema. Every kind of the registry is here
// (types.test.ts checks it against kindModules).
export { ProjectType } from "./project/schema.ts";
export { DatabaseType } from "./database/schema.ts";
export { DatabaseRestoreType } from "./database-restore/schema.ts";
export { ConnectionType } from "./connection/schema.ts";
export { DatabaseBackupType } from "./database-backup/schema.ts";
export { BackupScheduleType } from "./backup-schedule/schema.ts";
