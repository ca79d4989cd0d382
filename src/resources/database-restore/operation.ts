import type { PublicDatabase as RemoteDatabase } from "../../contract/index.ts";
import { errorCode } from "../../operator/api.ts";
import { messageOf } from "../../operator/errors.ts";
import { idempotencyKeyOf } from "../../operator/identity.ts";
import type { MdsApi, MdsRemote } from "../remote/remote-api.ts";
import { Refused } from "../remote/operations.ts";

// The restore's calls to the service (POST /v1/databases/{target}/restore, then the target followed): thin, data
// back, a refusal as `Refused`. Started with an Idempotency-Key derived from the target and the restore's key, so a
// re-POST after a crash (only to a server that announced replay) replays instead of restoring twice. The order they
// are made in, which is what makes a restore happen once, is the controller's.

function restoreRequestKey(targetDatabaseId: string, key: string): string {
  return idempotencyKeyOf("restore", targetDatabaseId, key);
}

/** Requests the restore. A refusal (a 4xx: the request, or a database or backup not found) is `Refused`. */
export async function startRestore(
  api: MdsApi,
  target: string,
  source: string,
  backupId: string,
  key: string,
): Promise<RemoteDatabase> {
  try {
    return await api.restoreDatabase(
      target,
      { source: { type: "backup", databaseId: source, backupId } },
      { idempotencyKey: restoreRequestKey(target, key) },
    );
  } catch (err) {
    const code = errorCode(err);
    if (code === "unprocessable" || code === "invalid_request" || code === "not_found")
      throw new Refused(code, messageOf(err));
    throw err;
  }
}

/** The target as the restore follows it (recovering while it runs), put into the mirror the kinds share. */
export async function followRestore(remote: MdsRemote, target: string): Promise<RemoteDatabase> {
  const db = await remote.api.getDatabase(target);
  remote.mirror.putDatabase(db);
  return db;
}

/** A database's source as one comparable string. */
export function sourceKeyOf(source: { type: string; databaseId?: string; backupId?: string } | null): string {
  if (source === null) return "none";
  return [source.type, source.databaseId ?? "", source.backupId ?? ""].join(":");
}
