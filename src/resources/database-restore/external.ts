import type { PublicDatabase as RemoteDatabase } from "../../contract/index.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { idempotencyKeyOf } from "../../operator/identity.ts";

// The restore's external call: started with an Idempotency-Key derived from the target and the restore's key, so a
// re-POST after a crash (only to a server that announced replay) replays instead of restoring twice.

function restoreRequestKey(targetDatabaseId: string, key: string): string {
  return idempotencyKeyOf("restore", targetDatabaseId, key);
}

export async function startRestore(
  api: MdsApi,
  target: string,
  source: string,
  backupId: string,
  key: string,
): Promise<RemoteDatabase> {
  return api.restoreDatabase(
    target,
    { source: { type: "backup", databaseId: source, backupId } },
    { idempotencyKey: restoreRequestKey(target, key) },
  );
}

/** A database's source as one comparable string. */
export function sourceKeyOf(source: { type: string; databaseId?: string; backupId?: string } | null): string {
  if (source === null) return "none";
  return [source.type, source.databaseId ?? "", source.backupId ?? ""].join(":");
}
