import { isoSeconds } from "../../operator/time.ts";
import type { MdsApi } from "./remote-api.ts";

// The service's backups as the kinds share them: the seal a DatabaseBackup puts on the backup the service answered
// its request with (a BackupSchedule's retention checks it), and the list a Database's status.latestBackup is read
// from, cached per database so that whatever wakes a Database costs one list call per refresh interval at most.

/**
 * What status.backupSeal seals: the DatabaseBackup (its uid), the database and the backup the service answered its
 * POST with. Written only from that answer, so a BackupSchedule's retention can tell a backup taken for its
 * DatabaseBackup from one whose id someone wrote into a status.
 */
export function backupSealMessage(uid: string, databaseId: string, backupId: string): string {
  return ["backup", uid, databaseId, backupId].join("\u0000");
}

/** A database's newest completed backup, as a Database's status.latestBackup holds it. */
interface NewestBackup {
  id: string;
  time: string;
  sizeBytes?: number;
}

/** The newest completed backup of a list (the service lists newest first; sorted here anyway). */
export function newestCompleted(
  backups: { id: string; status: string; createdAt: string; size?: number | null | undefined }[],
): NewestBackup | undefined {
  const newest = backups
    .filter((b) => b.status === "completed" && !Number.isNaN(Date.parse(b.createdAt)))
    .sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt))[0];
  if (newest === undefined) return undefined;
  return {
    id: newest.id,
    time: isoSeconds(newest.createdAt),
    ...(typeof newest.size === "number" ? { sizeBytes: newest.size } : {}),
  };
}

// One list call per database per refresh interval at most, whatever wakes its Database (events, resyncs, several
// kinds). An entry serves only the client (token) that read it; a DatabaseBackup that completes forgets its database's.
const readAt = new Map<string, { api: MdsApi; at: number; value: NewestBackup | undefined }>();

/** The next read of this database's latest backup asks the service (a backup of it just completed). */
export function forgetLatestBackup(databaseId: string): void {
  readAt.delete(databaseId);
}

/**
 * The database's newest completed backup; `undefined` when it has none; `"unknown"` when the list could not be read
 * (the Database keeps the value it had: a failed read is not a missing backup, and never fails its reconcile).
 */
export async function latestBackupOf(
  api: MdsApi,
  databaseId: string,
  now = Date.now(),
  refreshMs = 60_000,
): Promise<NewestBackup | undefined | "unknown"> {
  const hit = readAt.get(databaseId);
  if (hit !== undefined && hit.api === api && now - hit.at < refreshMs) return hit.value;
  try {
    const value = newestCompleted((await api.listBackups(databaseId, { limit: 100 })).data);
    readAt.set(databaseId, { api, at: now, value });
    return value;
  } catch {
    return "unknown";
  }
}
