// Addresses of the kinds for the kube layer; each is defined beside its schema. src/resources/registry.test.ts checks
// that every kind of the registry is here.
export { ProjectType } from "./project/schema.ts";
export { DatabaseType } from "./database/schema.ts";
export { DatabaseRestoreType } from "./database-restore/schema.ts";
export { ConnectionType } from "./connection/schema.ts";
export { DatabaseBackupType } from "./database-backup/schema.ts";
export { BackupScheduleType } from "./backup-schedule/schema.ts";
