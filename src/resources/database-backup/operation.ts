import type { PublicBackup } from "../../contract/index.ts";
import { errorCode } from "../../operator/api.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { idempotencyKeyOf } from "../../operator/identity.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { Refused } from "../remote/operations.ts";

// The backup's calls to the service (POST and follow /v1/databases/{id}/backups): thin, idempotent, data back, a
// refusal as `Refused`. The order they are made in, which is what makes a backup happen once, is the controller's.

/** Why the service refused a backup: no such route (the database is there), the database gone, or the request. */
export type BackupRefusal = "NotSupported" | "DatabaseGone" | "Invalid";

/** The Idempotency-Key of the backup POST: one backup per database, namespace and key. */
export function backupRequestKey(databaseId: string, namespace: string, key: string): string {
  return idempotencyKeyOf("backup", databaseId, namespace, key);
}

/**
 * Requests the backup; a POST with the same key replays at a server that announced replay. A refusal (a 4xx, so the
 * POST did not act) is `Refused<BackupRefusal>`; anything else is thrown as it came.
 */
export async function requestBackup(api: MdsApi, databaseId: string, requestKey: string): Promise<PublicBackup> {
  try {
    return await api.createBackup(databaseId, { idempotencyKey: requestKey });
  } catch (err) {
    const status = (err as { status?: unknown }).status;
    if (status === 404 || status === 405) {
      // The database was read a moment ago: a 404 that is not about it is a route this server does not have.
      const stillThere = await api.getDatabase(databaseId).then(
        () => true,
        () => false,
      );
      throw new Refused<BackupRefusal>(stillThere ? "NotSupported" : "DatabaseGone", (err as Error).message);
    }
    if (errorCode(err) === "invalid_request" || errorCode(err) === "unprocessable") {
      throw new Refused<BackupRefusal>("Invalid", (err as Error).message);
    }
    throw err;
  }
}

/**
 * The backup `backupId` as the database's own list shows it: a backup id written into status by anyone else is not
 * found there (ReconcileError RemoteNotFound; no other backup is taken).
 */
export async function findBackup(api: MdsApi, databaseId: string, backupId: string): Promise<PublicBackup> {
  const list = await api.listBackups(databaseId, { limit: 100 });
  const backup = list.data.find((b) => b.id === backupId);
  if (backup === undefined) {
    throw new ReconcileError(
      "RemoteNotFound",
      `backup "${backupId}" is not among database "${databaseId}"'s backups; the operator does not take another`,
    );
  }
  return backup;
}
