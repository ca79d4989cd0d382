import type { MdsApi } from "../remote/remote-api.ts";
import { WaitingError } from "../../operator/errors.ts";
import { connectionNameOf, incarnationKeyOf, isNameOf, remoteIdOf } from "../../operator/identity.ts";
import type { Creation, ExternalClient, Observation } from "../../operator/managed-handler.ts";
import { connectionCalls, mintNamed } from "../../operator/secret/recovery.ts";
import type { RemoteMirror } from "../remote/mirror.ts";
import { readinessWithSecret, secretTargetOf } from "../remote/database.ts";
import type { Connection } from "./schema.ts";

// The Connection kind's external client. Its remote object is a connection of an existing database: created by a
// mint under a name of its own (a mint whose answer was lost is found by that name and revoked), rotated and
// recovered like any connection Secret's, revoked on deletion. A database that is gone takes its connections with it.

export type ConnectionObject = Connection & {
  apiVersion: string;
  kind: string;
  metadata: Connection["metadata"] & { name: string };
};

interface ConnectionExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  databaseId: string;
}

export function createConnectionExternal(deps: ConnectionExternalDeps): ExternalClient<ConnectionObject> {
  const { api, mirror, instanceId, databaseId } = deps;
  const nameFor = (obj: ConnectionObject) =>
    connectionNameOf(instanceId, "Connection", obj.metadata.namespace ?? "default", obj.metadata.name);
  const connections = connectionCalls<ConnectionObject>({
    api,
    mirror,
    connectionName: nameFor,
    // It never creates a database: the original connection is the Database's (or someone else's), never its own.
    ownsOriginal: () => false,
    // A connection's creation answer is not replayed: lost credentials are replaced by a new mint.
    plan: async () => ({ replay: undefined, originalConnectionId: undefined }),
  });
  const revoke = (obj: ConnectionObject, id: string) => connections.revoke(obj, databaseId, id);

  return {
    async observe(obj): Promise<Observation> {
      const db = await mirror.getDatabase(databaseId);
      const minted = remoteIdOf(obj) !== undefined;
      if (db === undefined || !minted) {
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: db === undefined ? "RemoteNotFound" : "Creating", message: "" },
          drift: [],
          fastPoll: db !== undefined,
        };
      }
      const current = obj.status?.connection?.id;
      const secret = secretTargetOf(obj, db, current);
      return {
        exists: true,
        status: { id: current ?? remoteIdOf(obj), databaseId: db.id },
        ready: readinessWithSecret(db, secret),
        drift: [],
        fastPoll: db.status === "provisioning" || db.status === "recovering",
        secret,
      };
    },

    async create(obj): Promise<Creation> {
      if ((await mirror.getDatabase(databaseId)) === undefined)
        throw new WaitingError("DatabaseNotReady", `database "${databaseId}" not found at the service`);
      const name = nameFor(obj);
      const { credentials, leaked } = await mintNamed({
        api,
        mirror,
        databaseId,
        name,
        idempotencyKey: incarnationKeyOf(obj, "connection", databaseId, name),
        keep: [],
      });
      const db = await mirror.getDatabase(databaseId);
      const secret = db === undefined ? undefined : secretTargetOf(obj, db, credentials.connectionId);
      if (secret === undefined) for (const id of leaked) await revoke(obj, id);
      // With a Secret to write, the loop revokes them after writing it (one of them may be what the Secret names now).
      return {
        id: credentials.connectionId,
        adopted: false,
        status: { databaseId },
        ...(secret === undefined ? {} : { credentials, secret, leaked }),
      };
    },

    async update() {},

    /**
     * Revokes what this resource holds: the connections of its own names (the first mint's and its rotations'). Ids
     * from its status or annotations alone are never enough: they are the user's to write, and this may act with
     * another namespace's token.
     */
    async delete(obj) {
      const db = await mirror.getDatabase(databaseId);
      if (db === undefined) return { done: true };
      for (const c of db.connections) if (isNameOf(c.name, nameFor(obj))) await revoke(obj, c.id);
      mirror.forgetDatabase(databaseId);
      return { done: true };
    },

    connections,
  };
}
