import type { SourceBody } from "../../contract/index.ts";
import type { MdsApi } from "../../operator/api.ts";
import { WaitingError } from "../../operator/errors.ts";
import { resolveBackup } from "../remote-database.ts";
import type { Database } from "./schema.ts";

/** A new database's source: empty, or a backup of a database named by id or by its Database resource's remote id. */
export async function sourceOf(
  api: MdsApi,
  obj: Pick<Database, "spec"> & { metadata: { namespace?: string | undefined } },
  databaseIdOf: (namespace: string, name: string) => string | undefined,
): Promise<SourceBody | undefined> {
  const s = obj.spec.source;
  if (s === undefined || s.type === "empty") return undefined;
  const ns = obj.metadata.namespace ?? "default";
  const sourceId = s.databaseId ?? (s.databaseRef === undefined ? undefined : databaseIdOf(ns, s.databaseRef.name));
  if (sourceId === undefined) {
    throw new WaitingError("DatabaseNotReady", `source database "${s.databaseRef?.name}" has no remote id yet; waiting for it`);
  }
  const backupId = await resolveBackup(api, sourceId, s.backupId);
  return { type: "backup", databaseId: sourceId, backupId };
}
