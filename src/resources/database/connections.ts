import type { CreateDatabaseBody } from "../../contract/index.ts";
import { connectionNameOf } from "../../operator/identity.ts";
import { connectionCalls } from "../../operator/secret/recovery.ts";
import { originalConnectionOf } from "../../operator/secret/revocation.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../remote/mirror.ts";
import type { DatabaseObject } from "./schema.ts";

// How a Database's lost credentials come back (the Secret component does the rest): while a server that announced
// replay still holds the creation response, the same POST with the same Idempotency-Key replays it; otherwise a
// connection is minted and the lost ones are revoked: the original one only if this resource created the database.

export function databaseConnections(deps: {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  /** The database of this resource's logicalId, asked of the service. */
  lookup(obj: DatabaseObject): Promise<RemoteDatabase | undefined>;
  /** The creation request as first sent, and its Idempotency-Key. */
  creation(obj: DatabaseObject): Promise<{ body: CreateDatabaseBody; idempotencyKey: string }>;
}) {
  const { api } = deps;
  return connectionCalls<DatabaseObject>({
    api,
    mirror: deps.mirror,
    connectionName: (obj) =>
      connectionNameOf(deps.instanceId, "Database", obj.metadata.namespace ?? "default", obj.metadata.name),
    // The database's original connection is ours when we created it; an adopted (externalId) one's is not.
    ownsOriginal: (obj) => obj.spec.externalId === undefined,
    async plan(obj, target) {
      const ours = obj.spec.externalId === undefined ? await deps.lookup(obj) : undefined;
      const replay = async () => {
        const { body, idempotencyKey } = await deps.creation(obj);
        const replayed = await api.createDatabase(body, { idempotencyKey });
        return replayed.id === target.databaseId
          ? replayed.connections.find((c) => c.id === replayed.defaultConnectionId)
          : undefined;
      };
      return {
        // Only a server that announced replay answers the same POST with the original response instead of acting.
        replay:
          ours !== undefined && ours.id === target.databaseId && api.replaysIdempotencyKeys() ? replay : undefined,
        // After a crash right after the POST the lost one is the original connection; an adopted (externalId)
        // database's other connections are not ours.
        originalConnectionId: originalConnectionOf(ours),
      };
    },
  });
}
