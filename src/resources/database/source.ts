import type { SourceBody } from "../../contract/index.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { resolveBackup } from "../remote/database.ts";
import type { Database } from "./schema.ts";

/**
 * A new database's source: empty, a backup of a database, or a clone of a live database (type database); the
 * source database named by id or by its Database resource's remote id. A clone waits (retried, SourceNotReady)
 * until its source exists and is ready, so nothing is created from a database that cannot be copied yet.
 */
export async function sourceOf(
  api: MdsApi,
  obj: Pick<Database, "spec"> & { metadata: { namespace?: string | undefined } },
  databaseIdOf: (namespace: string, name: string) => string | undefined,
): Promise<SourceBody | undefined> {
  const s = obj.spec.source;
  if (s === undefined || s.type === "empty") return undefined;
  if (s.databaseId !== undefined && obj.spec.credentials === undefined) {
    // As for restores by id: the operator's token is never lent to copy an arbitrary database named by id, whether
    // live (a clone) or through one of its backups.
    throw new TerminalError(
      "InvalidSpec",
      `a ${s.type === "database" ? "clone" : "database from a backup"} by source.databaseId needs spec.credentials.secretRef (a token of the source database's workspace in this namespace)`,
    );
  }
  const ns = obj.metadata.namespace ?? "default";
  const sourceId = s.databaseId ?? (s.databaseRef === undefined ? undefined : databaseIdOf(ns, s.databaseRef.name));
  if (s.type === "database")
    return { type: "database", databaseId: await readySource(api, sourceId, s.databaseRef?.name, ns) };
  if (sourceId === undefined) {
    throw new WaitingError(
      "DatabaseNotReady",
      `source database "${s.databaseRef?.name}" has no remote id yet; waiting for it`,
    );
  }
  const backupId = await resolveBackup(api, sourceId, s.backupId);
  return { type: "backup", databaseId: sourceId, backupId };
}

/** The clone source's id once it exists and is ready at the service; until then a retrying SourceNotReady. */
async function readySource(
  api: MdsApi,
  sourceId: string | undefined,
  refName: string | undefined,
  ns: string,
): Promise<string> {
  const what = refName === undefined ? `source database "${sourceId}"` : `source database "${refName}"`;
  if (sourceId === undefined) {
    throw new WaitingError(
      "SourceNotReady",
      `${what} not found in namespace "${ns}" or not created yet; the clone is created once it is ready`,
    );
  }
  const db = await api.getDatabase(sourceId);
  if (db.status !== "ready") {
    throw new WaitingError(
      "SourceNotReady",
      `${what} (${sourceId}) is ${db.status}, not ready; the clone is created once it is ready`,
    );
  }
  return sourceId;
}

/** status.source: what the database was created from, as sent (nothing for an empty one). */
export function sourceStatusOf(source: SourceBody | undefined): { source?: SourceBody } {
  return source === undefined || source.type === "empty" ? {} : { source };
}

/** A clone's source as the spec names it, without asking the service (for a create found again by logicalId). */
export function cloneSourceOfSpec(
  obj: Pick<Database, "spec"> & { metadata: { namespace?: string | undefined } },
  databaseIdOf: (namespace: string, name: string) => string | undefined,
): SourceBody | undefined {
  const s = obj.spec.source;
  if (s?.type !== "database") return undefined;
  const id =
    s.databaseId ??
    (s.databaseRef === undefined ? undefined : databaseIdOf(obj.metadata.namespace ?? "default", s.databaseRef.name));
  return id === undefined ? undefined : { type: "database", databaseId: id };
}
