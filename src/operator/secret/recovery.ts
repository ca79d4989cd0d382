import { errorCode, isApiNotFound, type ConnectionApi, type ConnectionMirror, type CreatedConnection } from "../api.ts";
import { ReconcileError } from "../errors.ts";
import { incarnationKeyOf } from "../identity.ts";
import { credentialsFromCreated, type ConnectionCredentials } from "./connection-credentials.ts";
import { isOwnConnection, revokeOwnConnection } from "./revocation.ts";
import type { ConnectionCalls, SecretTarget } from "./types.ts";

// Recovery: credentials for a Secret that lost them (replayed creation, else a new connection), a rotation's mint,
// and connectionCalls(), which builds a kind's ConnectionCalls from its RecoveryPlan.

/**
 * Credentials whose password was lost (a missing or edited Secret, a crash between the create and the Secret
 * write). While a server that announced replay still holds the creation response, the same POST with the same
 * Idempotency-Key replays it, credentials included; otherwise a new connection is minted under our connection name
 * and every connection whose password nobody holds is revoked: the one the Secret named, the database's original
 * one, and any other of our name (a mint whose answer was lost: the public API does not replay, so that POST created
 * a connection nobody will ever see the password of).
 */
async function replayOrMint(args: {
  /** The resource the credentials are for: its uid is in the mint's key (identity.ts, incarnationKeyOf). */
  owner: { metadata: { uid?: string | undefined } };
  api: ConnectionApi;
  mirror: ConnectionMirror;
  target: SecretTarget;
  previousConnectionId: string | undefined;
  connectionName: string;
  /** Replays the creation and returns its default connection if it is still the target's; undefined: not ours. */
  replay: (() => Promise<CreatedConnection | undefined>) | undefined;
  /** The database's original connection: lost when no Secret ever named a newer one. */
  originalConnectionId: string | null | undefined;
  /** Connections that must not be revoked as lost (one being retired after a rotation). */
  keep?: string[] | undefined;
  /** Revokes a lost connection if it is the owner's own (ConnectionCalls.revoke): used when the mint's answer is unusable. */
  revokeLost: (id: string) => Promise<unknown>;
}): Promise<{ credentials: ConnectionCredentials; revoke: string[] }> {
  const { api, target, previousConnectionId } = args;
  if (args.replay !== undefined) {
    try {
      const connection = await args.replay();
      if (connection !== undefined && target.connections.some((c) => c.id === connection.id)) {
        const revoke =
          previousConnectionId !== undefined && previousConnectionId !== connection.id ? [previousConnectionId] : [];
        return { credentials: credentialsFromCreated(connection), revoke };
      }
    } catch (err) {
      // Past the replay window the POST is a 409 (logicalId taken) or a 422 (key reused with another body): mint.
      const code = errorCode(err);
      if (
        code !== "conflict" &&
        code !== "unprocessable" &&
        code !== "invalid_request" &&
        !(err instanceof ReconcileError)
      )
        throw err;
    }
  }
  const lost = previousConnectionId ?? args.originalConnectionId ?? undefined;
  let minted: Awaited<ReturnType<typeof mintNamed>>;
  try {
    minted = await mintNamed({
      api,
      mirror: args.mirror,
      databaseId: target.databaseId,
      name: args.connectionName,
      // The name is in the key: two resources that manage the same database in turn (an adoption handed over) mint
      // different requests, and the service refuses one key reused with another body (422).
      idempotencyKey: incarnationKeyOf(
        args.owner,
        "mint",
        target.databaseId,
        previousConnectionId ?? "none",
        args.connectionName,
      ),
      keep: args.keep ?? [],
    });
  } catch (err) {
    // An answer without a connection string: the lost connection stays lost, revoked like the minted one (through
    // the ownership check: `previous` came from a Secret or a status, anyone's to write).
    if (err instanceof ReconcileError && lost !== undefined) await args.revokeLost(lost).catch(() => undefined);
    throw err;
  }
  const { credentials, leaked } = minted;
  return {
    credentials,
    revoke: [
      ...new Set(
        [previousConnectionId ?? args.originalConnectionId ?? undefined, ...leaked].filter(
          (id): id is string => id !== undefined && id !== credentials.connectionId,
        ),
      ),
    ],
  };
}

/**
 * Mints a connection under `name` and returns its credentials, and the connections of that name whose password
 * nobody holds (an earlier POST whose answer never arrived: the public API does not replay, so it created one). An
 * answer without a connection string makes the minted one as lost as the others: all are revoked, and it throws.
 * `keep`: connections of that name that must live on (one being retired).
 */
export async function mintNamed(args: {
  api: ConnectionApi;
  mirror: ConnectionMirror;
  databaseId: string;
  name: string;
  idempotencyKey: string;
  keep: string[];
}): Promise<{ credentials: ConnectionCredentials; leaked: string[] }> {
  const { api } = args;
  const minted = await api.createConnection(
    args.databaseId,
    { name: args.name },
    { idempotencyKey: args.idempotencyKey },
  );
  args.mirror.forgetDatabase(args.databaseId);
  // Read after the mint: a connection of our name that is not the minted one was minted by an earlier attempt
  // whose answer never arrived.
  const current = await api.getDatabase(args.databaseId);
  const leaked = current.connections
    .filter((c) => c.name === args.name && c.id !== minted.id && !args.keep.includes(c.id))
    .map((c) => c.id);
  try {
    return { credentials: credentialsFromCreated(minted), leaked };
  } catch (err) {
    // Only connections of the name just minted under, read from the service: the caller's own.
    for (const id of new Set([...leaked, minted.id])) await api.deleteConnection(id).catch(() => undefined);
    throw err;
  }
}

/** What a kind knows about recovering one object's credentials: whether its creation can be replayed, and how. */
interface RecoveryPlan {
  /** Replays the creation and returns its default connection if it is still the target's; undefined: not ours. */
  replay: (() => Promise<CreatedConnection | undefined>) | undefined;
  /** The database's original connection: lost when no Secret ever named a newer one. */
  originalConnectionId: string | null | undefined;
}

/**
 * A kind's ConnectionCalls: recovery through replayOrMint with the kind's plan, revocation only of the owner's own
 * connections (revocation.ts; one already gone is done). The kind writes only its plan.
 */
export function connectionCalls<T extends { metadata: { uid?: string | undefined } }>(args: {
  api: ConnectionApi;
  mirror: ConnectionMirror;
  connectionName: (obj: T) => string;
  /** Whether the original connection of the target database is this resource's (it created the database). */
  ownsOriginal: (obj: T) => boolean;
  plan: (obj: T, target: SecretTarget) => Promise<RecoveryPlan>;
}): ConnectionCalls<T> {
  const { api, mirror } = args;
  const calls: ConnectionCalls<T> = {
    owns(obj, target, id) {
      const connection = target.connections.find((c) => c.id === id);
      return isOwnConnection(connection, args.connectionName(obj), {
        ownsOriginal: args.ownsOriginal(obj),
        originalConnectionId: target.originalConnectionId,
      });
    },
    async recover(obj, target, previousConnectionId, keep) {
      const plan = await args.plan(obj, target);
      const revokeLost = (id: string) => calls.revoke(obj, target.databaseId, id);
      return replayOrMint({
        owner: obj,
        api,
        mirror,
        target,
        previousConnectionId,
        connectionName: args.connectionName(obj),
        keep,
        revokeLost,
        ...plan,
      });
    },
    async mint(obj, target, suffix) {
      // A name per rotation: the connections of that name other than the minted one were lost (never the current one).
      const name = args.connectionName(obj).slice(0, 64 - suffix.length) + suffix; // names are at most 64 characters
      return mintNamed({
        api,
        mirror,
        databaseId: target.databaseId,
        name,
        idempotencyKey: incarnationKeyOf(obj, "rotate", target.databaseId, name),
        keep: [],
      });
    },
    async openSessions(_obj, id) {
      try {
        return (await api.getConnection(id)).openSessions;
      } catch (err) {
        if (isApiNotFound(err)) return 0; // revoked already: no session of it is left
        throw err;
      }
    },
    revoke: (obj, databaseId, id) =>
      revokeOwnConnection({
        api,
        databaseId,
        id,
        ownName: args.connectionName(obj),
        ownsOriginal: args.ownsOriginal(obj),
      }),
  };
  return calls;
}
