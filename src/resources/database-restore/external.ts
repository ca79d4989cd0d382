import type { Database as RemoteDatabase, MdsApi } from "../../operator/api.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { idempotencyKeyOf } from "../../operator/identity.ts";

// The restore's external calls: resolve the backup once, start the restore with an Idempotency-Key derived from
// the target and the restore's key (so a re-POST after a crash replays instead of restoring twice), read state.

export async function resolveBackup(api: MdsApi, sourceDatabaseId: string, backupId: string | undefined): Promise<string> {
  if (backupId !== undefined) return backupId;
  const backups = await api.listBackups(sourceDatabaseId, { limit: 100 });
  const latest = backups.data.find((b) => b.status === "completed");
  if (latest === undefined) throw new ReconcileError("DatabaseNotReady", `database "${sourceDatabaseId}" has no completed backup to restore`);
  return latest.id;
}

export function restoreRequestKey(targetDatabaseId: string, key: string): string {
  return idempotencyKeyOf("restore", targetDatabaseId, key);
}

export async function startRestore(api: MdsApi, target: string, source: string, backupId: string, key: string): Promise<RemoteDatabase> {
  return api.restoreDatabase(target, { source: { type: "backup", databaseId: source, backupId } }, { idempotencyKey: restoreRequestKey(target, key) });
}
