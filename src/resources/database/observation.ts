import { DatabaseStatus as RemoteDatabaseStatus } from "../../contract/index.ts";
import { TerminalError } from "../../operator/errors.ts";
import type { Creation, Observation } from "../../operator/managed-handler.ts";
import { pollDelayOf, readinessWithSecret, secretTargetOf } from "../remote/database.ts";
import type { MirroredDatabase as RemoteDatabase } from "../remote/mirror.ts";
import type { DatabaseObject } from "./schema.ts";

// What a Database resource makes of the remote database it observes or adopts: pure functions of the two.

/**
 * The status fields the remote database decides. A remote status this version does not know (a newer service's)
 * is not written: status.remoteStatus is a closed set in the CRD, and Ready says RemoteUnreadable meanwhile.
 */
export function statusOf(db: RemoteDatabase) {
  const known = (RemoteDatabaseStatus.options as readonly string[]).includes(db.status);
  return {
    projectId: db.project.id,
    remoteStatus: known ? db.status : undefined,
    ...(db.region === null ? {} : { region: db.region.id }),
  };
}

/**
 * The observation of `db` for `obj` in project `projectId`; `wantedName`: the name the spec asks for (none: keep). A
 * database of another project is refused before anything is written or minted.
 */
export function observationOf(
  obj: DatabaseObject,
  db: RemoteDatabase,
  projectId: string,
  wantedName: string | undefined,
): Observation {
  if (db.project.id !== projectId) {
    // An externalId (or an id annotation written by hand) may be a typo, or another team's database in the same
    // workspace.
    throw new TerminalError(
      "AdoptionRefused",
      `cannot adopt database "${db.id}": it belongs to project "${db.project.id}", not to this Database's project "${projectId}"; fix spec.externalId or the project reference`,
    );
  }
  const secret = secretTargetOf(obj, db, obj.status?.connection?.id);
  return {
    exists: true,
    status: { id: db.id, ...statusOf(db), ...(secret === undefined ? {} : { endpoints: secret.endpoints }) },
    ready: readinessWithSecret(db, secret),
    // isDefault is chosen at creation only: the public API cannot change it afterwards (its PATCH takes no isDefault).
    drift:
      wantedName === undefined || db.name === wantedName
        ? []
        : [{ field: "displayName", desired: wantedName, actual: db.name }],
    fastPoll: db.status === "provisioning" || db.status === "recovering",
    pollAfterMs: db.status === "provisioning" ? pollDelayOf(db) : undefined,
    secret,
  };
}

/** A database of this resource's logicalId found instead of created (a create whose answer was lost). */
export function adoptedCreation(obj: DatabaseObject, db: RemoteDatabase): Creation {
  return { id: db.id, adopted: true, status: statusOf(db), secret: secretTargetOf(obj, db, undefined) };
}
