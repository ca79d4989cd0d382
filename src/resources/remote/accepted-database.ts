import type { KubeObject } from "../../kube/types.ts";
import type { AcceptedIds } from "../../operator/accepted.ts";
import { WaitingError } from "../../operator/errors.ts";

// The one rule for every kind that acts on a Database's remote database through a reference (a Connection, a clone's
// source, a DatabaseBackup, a DatabaseRestore's target and source, a BackupSchedule): the id the Database's own loop
// accepted (src/operator/accepted.ts), never the id its status names.

/**
 * The remote database a referrer may act on through Database `name` of `namespace` (`db`, from the cache): the id its
 * own loop accepted. Otherwise it waits, with reason DatabaseNotAccepted (or DatabaseNotReady while it has none).
 */
export function acceptedDatabaseId(
  accepted: AcceptedIds,
  db: KubeObject | undefined,
  ref: { namespace: string; name: string },
): string {
  const id = acceptedDatabaseIdIfAny(accepted, db, ref);
  if (id !== undefined) return id;
  const what = `Database "${ref.name}" of namespace "${ref.namespace}"`;
  throw new WaitingError("DatabaseNotReady", db === undefined ? `${what} not found` : `${what} has no remote id yet`);
}

/**
 * The same, for a referrer with its own way of waiting for a Database that is missing or has no id yet (a clone's
 * SourceNotReady): undefined then; a Database whose status names an id its loop has not accepted still waits here.
 */
export function acceptedDatabaseIdIfAny(
  accepted: AcceptedIds,
  db: KubeObject | undefined,
  ref: { namespace: string; name: string },
): string | undefined {
  const id = accepted.idOf("Database", db);
  const recorded = (db?.["status"] as { id?: unknown } | undefined)?.id;
  if (id !== undefined || recorded === undefined) return id;
  const what = `Database "${ref.name}" of namespace "${ref.namespace}"`;
  if (!accepted.decided("Database", db!)) {
    // Its loop has not run since this operator started: it will decide in moments, and its decision wakes this one.
    throw new WaitingError("DatabaseNotAccepted", `${what} is not yet reconciled by this operator`, { quiet: true });
  }
  throw new WaitingError(
    "DatabaseNotAccepted",
    `${what} names remote database "${String(recorded)}" in its status, which its own reconcile has not accepted (yet): nothing is done through it until it has (it created or adopted that database under its own token without an adoption conflict; after an operator restart, within moments of its first reconcile)`,
  );
}
