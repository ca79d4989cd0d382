import type { KindRegistration } from "../operator/kind.ts";
import { backupScheduleResource } from "./backup-schedule/index.ts";
import { connectionResource } from "./connection/index.ts";
import { databaseBackupResource } from "./database-backup/index.ts";
import { databaseRestoreResource } from "./database-restore/index.ts";
import { databaseResource } from "./database/index.ts";
import type { KindSettings, ResourceKind } from "./kind.ts";
import { projectResource } from "./project/index.ts";

// The registry: every kind, one line each. From here come the CRDs (crd.ts) and the operator's kinds (operatorKinds).
// A new kind is its own folder plus one line below (src/resources/README.md lists the files a kind consists of).
export const resourceKinds: ResourceKind[] = [
  projectResource,
  databaseResource,
  databaseRestoreResource,
  connectionResource,
  databaseBackupResource,
  backupScheduleResource,
];

export function operatorKinds(settings: KindSettings = {}): KindRegistration[] {
  return resourceKinds.map((k) => k.registration(settings));
}
