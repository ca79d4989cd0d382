import { isApiNotFound, type ConnectionApi } from "../api.ts";
import { SecretType, type Secret } from "../../kube/types.ts";
import { isNameOf } from "../identity.ts";
import { annotations, labels } from "./render.ts";
import type { ConnectionCalls, PublisherDeps, RevokeResult, SecretOwner, SecretTarget } from "./types.ts";

// Revocation and its checks. Anyone who can write a namespace can write a Secret's labels and annotations and a
// resource's status, so what they name is never trusted: an owner revokes only its own connections (its names, or
// the original connection of a database it created), decided from the service's own list read just before the DELETE.

/**
 * The connection the server made together with the database. The public API may answer `defaultConnectionId: null`
 * and name that connection itself; then it is the oldest one, if it was made with the database (within a minute of
 * it): a later one was minted afterwards, by us (under our name) or by someone else, and is not ours to revoke.
 */
export function originalConnectionOf(
  db:
    | {
        createdAt: string;
        defaultConnectionId?: string | null | undefined;
        connections: { id: string; createdAt: string }[];
      }
    | undefined,
): string | undefined {
  if (db === undefined) return undefined;
  if (db.defaultConnectionId) return db.defaultConnectionId;
  const oldest = [...db.connections].sort(
    (a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id),
  )[0];
  return oldest !== undefined && Date.parse(oldest.createdAt) - Date.parse(db.createdAt) <= 60_000
    ? oldest.id
    : undefined;
}

/**
 * Whether the connection is one this resource minted on its own database: one of its names (first mint, rotations),
 * or the connection the server made with a database this resource created (`ownsOriginal`: not an adopted one, whose
 * original connection someone else may hold). Decided from the service's own list of the database's connections,
 * never from an annotation, a label or a status: those are anyone's to write who can write the namespace.
 */
export function isOwnConnection(
  connection: { id: string; name: string } | undefined,
  ownName: string,
  original: { ownsOriginal: boolean; originalConnectionId: string | undefined },
): boolean {
  if (connection === undefined) return false;
  return (
    isNameOf(connection.name, ownName) || (original.ownsOriginal && connection.id === original.originalConnectionId)
  );
}

/**
 * Revokes `id` at the service only if it is a connection of `databaseId` that `ownName`'s owner minted (or the
 * original one of a database it created). One already gone is `absent`: nothing to call.
 */
export async function revokeOwnConnection(args: {
  api: ConnectionApi;
  databaseId: string;
  id: string;
  ownName: string;
  ownsOriginal: boolean;
}): Promise<RevokeResult> {
  const { api, databaseId, id } = args;
  // Read fresh, not from the mirror: the one check between an id anyone could have written and a DELETE made
  // with the token of the database's workspace. Its cost is one GET per revocation, which is rare.
  let db: Awaited<ReturnType<ConnectionApi["getDatabase"]>>;
  try {
    db = await api.getDatabase(databaseId);
  } catch (err) {
    if (isApiNotFound(err)) return "absent"; // the database, and so its connections, are gone
    throw err;
  }
  const connection = db.connections.find((c) => c.id === id);
  if (connection === undefined) return "absent"; // gone, or another database's: either way, nothing to call
  if (
    !isOwnConnection(connection, args.ownName, {
      ownsOriginal: args.ownsOriginal,
      originalConnectionId: originalConnectionOf(db),
    })
  )
    return "refused";
  try {
    await api.deleteConnection(id);
  } catch (err) {
    if (!isApiNotFound(err)) throw err;
  }
  return "revoked";
}

/**
 * The revocations of the Secret component for one owner: what a recovery, a crash or a rotation left to revoke.
 * Each goes through ConnectionCalls.revoke, so through the ownership check above. One closure over the owner, longer
 * than 80 lines only because it holds four short functions.
 */
// eslint-disable-next-line max-lines-per-function -- closure factory: four short functions over one owner
export function revocations<T extends SecretOwner>(deps: Omit<PublisherDeps, "secrets" | "crashPoint">, obj: T) {
  const ns = obj.metadata.namespace;

  /** Says why a connection was not revoked: no remote call was made for it. */
  function refused(id: string, databaseId: string, source: string) {
    deps.log.warn(
      { connectionId: id, databaseId, source },
      "Refused to revoke a connection this resource did not mint",
    );
    deps.events.record(
      obj,
      "Warning",
      "RevokeRefused",
      `Did not revoke connection "${id}" (named by ${source}): it is not a connection this ${obj.kind} minted on database "${databaseId}"`,
    );
  }

  /** Revokes one of this resource's own connections; a failure is logged, not thrown. */
  async function revoke(
    calls: ConnectionCalls<T>,
    target: SecretTarget,
    id: string,
    why = "whose credentials were lost",
    source = "the operator's records",
  ) {
    try {
      const result = await calls.revoke(obj, target.databaseId, id);
      if (result === "refused") refused(id, target.databaseId, source);
      else if (result === "revoked")
        deps.events.record(obj, "Normal", "ConnectionRevoked", `Revoked connection "${id}" ${why}`);
    } catch (err) {
      deps.log.warn({ err, connectionId: id }, "Could not revoke a lost connection");
    }
  }

  /**
   * A crash between a rebuilt Secret's write and the revocation leaves status naming the replaced connection, whose
   * password nobody holds any more: revoke it now. Only when the live Secret confirms it holds another connection
   * (a lagging cache must never get the published connection revoked). Steady state: no call.
   */
  async function revokeReplaced(calls: ConnectionCalls<T>, target: SecretTarget, published: string) {
    // A rotation in progress replaced it on purpose, or it is retiring: it goes after its grace period (rotation.ts).
    if (obj.status?.rotation?.pending !== undefined) return;
    const recorded = obj.status?.connection?.id;
    if (recorded !== undefined && recorded === obj.status?.rotation?.retiring?.id) return;
    if (recorded === undefined || recorded === published || !target.connections.some((c) => c.id === recorded)) return;
    const live = await deps.kube.get<Secret>(SecretType, ns, target.name);
    if (live?.metadata.labels?.[labels.connectionId] !== published) return;
    await revoke(calls, target, recorded, undefined, "status.connection");
  }

  /**
   * Revokes what the Secret's revoke annotation lists (never what it names now, nor the retiring one), then clears
   * it. Anyone who can write the Secret can write the list: only this resource's own connections are revoked.
   */
  async function revokeNoted(
    calls: ConnectionCalls<T>,
    target: SecretTarget,
    seen: Secret | undefined,
    current: string,
  ) {
    if (seen?.metadata.annotations?.[annotations.revoke] === undefined) return;
    const secret = await deps.kube.get<Secret>(SecretType, ns, seen.metadata.name);
    const noted = secret?.metadata.annotations?.[annotations.revoke];
    if (secret === undefined || noted === undefined) return;
    const retiring = obj.status?.rotation?.retiring?.id;
    // At most as many as a recovery writes, and ids only: a longer list was not written by the operator.
    const ids = [...new Set(noted.split(",").filter((id) => id !== "" && id !== current && id !== retiring))].slice(
      0,
      16,
    );
    const revoked: string[] = [];
    // A failed revocation throws: the list stays for the next reconcile.
    for (const id of ids) {
      const result = await calls.revoke(obj, target.databaseId, id);
      if (result === "refused")
        refused(
          id.slice(0, 80),
          target.databaseId,
          `the annotation ${annotations.revoke} on Secret "${secret.metadata.name}"`,
        );
      if (result === "revoked") revoked.push(id);
    }
    if (revoked.length > 0)
      deps.events.record(
        obj,
        "Normal",
        "ConnectionRevoked",
        `Revoked connections whose credentials were lost: ${revoked.join(",")}`,
      );
    await deps.kube.patch(SecretType, ns, secret.metadata.name, {
      metadata: { resourceVersion: secret.metadata.resourceVersion, annotations: { [annotations.revoke]: null } },
    });
  }

  /** Revokes the connection a rotation retired, its grace period over; a failure (other than gone) throws. */
  async function retire(calls: ConnectionCalls<T>, target: SecretTarget, id: string) {
    const result = await calls.revoke(obj, target.databaseId, id);
    if (result === "refused") refused(id, target.databaseId, "status.rotation.retiring");
    if (result === "revoked")
      deps.events.record(
        obj,
        "Normal",
        "ConnectionRevoked",
        `Revoked connection "${id}": its grace period after a rotation ended`,
      );
  }

  return { refused, revoke, revokeReplaced, revokeNoted, retire };
}
