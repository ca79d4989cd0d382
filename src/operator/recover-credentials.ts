import type { CreatedConnection } from "../contract/index.ts";
import { errorCode, type MdsApi } from "./api.ts";
import type { ConnectionCredentials } from "./connection-secret.ts";
import { ReconcileError } from "./errors.ts";
import { credentialsFromCreated, idempotencyKeyOf } from "./identity.ts";
import type { SecretTarget } from "./managed-reconciler.ts";
import type { RemoteMirror } from "./remote-mirror.ts";

/**
 * Credentials whose password was lost (a missing or edited Secret, a crash between the create and the Secret
 * write). While the service still holds the creation response, the same POST with the same Idempotency-Key
 * replays it, credentials included; past that window a new connection is minted (with its own derived key, so
 * a crash while minting replays too) and the connection whose password nobody holds is revoked.
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
  originalConnectionId: string | undefined;
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
  const lost = previousConnectionId ?? args.originalConnectionId;
  return { credentials: credentialsFromCreated(minted), revoke: lost === undefined || lost === minted.id ? [] : [lost] };
}
