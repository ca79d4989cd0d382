import { errorCode, isApiNotFound, type CreatedConnection, type MdsApi } from "./api.ts";
import type { ConnectionCredentials } from "./connection-secret.ts";
import { ReconcileError } from "./errors.ts";
import { credentialsFromCreated, idempotencyKeyOf } from "./identity.ts";
import type { ConnectionOwner, SecretTarget } from "./secret-publisher.ts";
import type { RemoteMirror } from "./remote-mirror.ts";

/**
 * The connection the server made together with the database. The public API may answer `defaultConnectionId: null`
 * and name that connection itself; then it is the oldest one, if it was made with the database (within a minute of
 * it): a later one was minted afterwards, by us (under our name) or by someone else, and is not ours to revoke.
 */
export function originalConnectionOf(
  db: { createdAt: string; defaultConnectionId?: string | null | undefined; connections: { id: string; createdAt: string }[] } | undefined,
): string | undefined {
  if (db === undefined) return undefined;
  if (db.defaultConnectionId) return db.defaultConnectionId;
  const oldest = [...db.connections].sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))[0];
  return oldest !== undefined && Date.parse(oldest.createdAt) - Date.parse(db.createdAt) <= 60_000 ? oldest.id : undefined;
}

/**
 * Credentials whose password was lost (a missing or edited Secret, a crash between the create and the Secret
 * write). While a server that announced replay still holds the creation response, the same POST with the same
 * Idempotency-Key replays it, credentials included; otherwise a new connection is minted under our connection name
 * and every connection whose password nobody holds is revoked: the one the Secret named, the database's original
 * one, and any other of our name (a mint whose answer was lost: the public API does not replay, so that POST created
 * a connection nobody will ever see the password of).
 */
export async function replayOrMint(args: {
  api: MdsApi;
  mirror: RemoteMirror;
  target: SecretTarget;
  previousConnectionId: string | undefined;
  connectionName: string;
  /** Replays the creation and returns its default connection if it is still the target's; undefined: not ours. */
  replay: (() => Promise<CreatedConnection | undefined>) | undefined;
  /** The database's original connection: lost when no Secret ever named a newer one. */
  originalConnectionId: string | null | undefined;
}): Promise<{ credentials: ConnectionCredentials; revoke: string[] }> {
  const { api, target, previousConnectionId } = args;
  if (args.replay !== undefined) {
    try {
      const connection = await args.replay();
      if (connection !== undefined && target.connections.some((c) => c.id === connection.id)) {
        const revoke = previousConnectionId !== undefined && previousConnectionId !== connection.id ? [previousConnectionId] : [];
        return { credentials: credentialsFromCreated(connection), revoke };
      }
    } catch (err) {
      // Past the replay window the POST is a 409 (logicalId taken) or a 422 (key reused with another body): mint.
      const code = errorCode(err);
      if (code !== "conflict" && code !== "unprocessable" && code !== "invalid_request" && !(err instanceof ReconcileError)) throw err;
    }
  }
  const minted = await api.createConnection(
    target.databaseId,
    { name: args.connectionName },
    { idempotencyKey: idempotencyKeyOf("mint", target.databaseId, previousConnectionId ?? "none") },
  );
  args.mirror.forgetDatabase(target.databaseId);
  // Read after the mint: a connection of our name that is not the minted one was minted by an earlier attempt
  // whose answer never arrived.
  const current = await api.getDatabase(target.databaseId);
  const leaked = current.connections.filter((c) => c.name === args.connectionName && c.id !== minted.id).map((c) => c.id);
  const lost = [previousConnectionId ?? args.originalConnectionId ?? undefined, ...leaked].filter((id): id is string => id !== undefined && id !== minted.id);
  let credentials: ConnectionCredentials;
  try {
    credentials = credentialsFromCreated(minted);
  } catch (err) {
    // An answer without a connection string: the minted connection is as lost as the others.
    lost.push(minted.id);
    for (const id of new Set(lost)) await api.deleteConnection(id).catch(() => undefined);
    throw err;
  }
  return { credentials, revoke: [...new Set(lost)] };
}

/** What a kind knows about recovering one object's credentials: whether its creation can be replayed, and how. */
export interface RecoveryPlan {
  /** Replays the creation and returns its default connection if it is still the target's; undefined: not ours. */
  replay: (() => Promise<CreatedConnection | undefined>) | undefined;
  /** The database's original connection: lost when no Secret ever named a newer one. */
  originalConnectionId: string | null | undefined;
}

/**
 * A kind's ConnectionOwner: recovery through replayOrMint with the kind's plan, revocation that treats a connection
 * already gone as revoked. The kind writes only its plan.
 */
export function connectionOwner<T>(args: {
  api: MdsApi;
  mirror: RemoteMirror;
  connectionName: (obj: T) => string;
  plan: (obj: T, target: SecretTarget) => Promise<RecoveryPlan>;
}): ConnectionOwner<T> {
  const { api, mirror } = args;
  return {
    async recover(obj, target, previousConnectionId) {
      const plan = await args.plan(obj, target);
      return replayOrMint({ api, mirror, target, previousConnectionId, connectionName: args.connectionName(obj), ...plan });
    },
    async revoke(id) {
      try {
        await api.deleteConnection(id);
      } catch (err) {
        if (!isApiNotFound(err)) throw err;
      }
    },
  };
}
