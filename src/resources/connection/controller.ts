import type { KubeObject } from "../../kube/types.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { remoteIdOf } from "../../operator/identity.ts";
import { acceptedDatabaseId } from "../remote/accepted-database.ts";
import { resolveCredentials, managedController, parseOrTerminal } from "../../operator/controller.ts";
import type { ExternalClient, ManagedHandler } from "../../operator/managed-handler.ts";
import { ConnectionType } from "./schema.ts";
import { createConnectionExternal, type ConnectionObject } from "./external.ts";
import { Connection } from "./schema.ts";
import { readDatabase } from "../database/read.ts";
import { typedReader } from "../kit/read.ts";
import { DatabaseType } from "../database/schema.ts";
import { remoteDatabaseStallingReasons } from "../remote/database.ts";
import type { MdsControllerContext } from "../remote/remote-api.ts";

// The Connection kind: one connection of a Database, in the Database's namespace or in one the Database allows
// (spec.connectionPolicy.allowedNamespaces). With a databaseRef it acts with the Database's own credentials: the
// Database's owner grants the namespace, and the token stays theirs.

const readConnection = typedReader(Connection).read;

/** The spec whose credentials a Connection acts with: its own (by id) or its Database's (by reference). */
type CredentialsSpec = Parameters<typeof resolveCredentials>[2];

function allows(db: KubeObject, namespace: string): boolean {
  if (db.metadata.namespace === namespace) return true;
  const allowed = readDatabase(db)?.spec.connectionPolicy?.allowedNamespaces ?? [];
  return allowed.includes(namespace) || allowed.includes("*");
}

const nothingToDo: ExternalClient<ConnectionObject> = {
  observe: async () => ({
    exists: false,
    status: {},
    ready: { ok: false, reason: "Creating", message: "" },
    drift: [],
    fastPoll: false,
  }),
  create: async () => Promise.reject(new Error("unreachable")),
  update: async () => {},
  delete: async () => ({ done: true }),
};

export function connectionHandler(
  ctx: Pick<MdsControllerContext, "pool" | "defaultCredentials" | "instanceId" | "cache" | "accepted">,
): ManagedHandler<ConnectionObject> {
  return {
    kind: "Connection",
    type: ConnectionType,
    parse: (raw) => parseOrTerminal(Connection, "Connection", raw) as ConnectionObject,
    secretDatabaseIds: (obj) =>
      [obj.status?.databaseId ?? obj.spec.databaseId].filter((id): id is string => id !== undefined),
    async connect(obj) {
      const ns = obj.metadata.namespace ?? "default";
      const deleting = obj.metadata.deletionTimestamp !== undefined;
      let databaseId = obj.spec.databaseId;
      let withdrawn: { reason: string; message: string } | undefined;
      let gone = false;
      // Its own token by id; the Database's (in the Database's namespace) by reference.
      let credentials: { namespace: string; spec: CredentialsSpec } = { namespace: ns, spec: obj.spec };
      const ref = obj.spec.databaseRef;
      if (ref !== undefined) {
        const dbNs = ref.namespace ?? ns;
        const db = ctx.cache(DatabaseType.kind).get(dbNs, ref.name);
        const dbSpec = readDatabase(db)?.spec;
        if (db === undefined) {
          // Never mint without the Database's consent and token; a deletion still revokes what was minted.
          if (!deleting) throw new WaitingError("DatabaseNotReady", `database "${dbNs}/${ref.name}" not found`);
          if (obj.status?.databaseId === undefined) return nothingToDo;
          databaseId = obj.status.databaseId;
          // Revoked with the token the Database's namespace resolves to without the Database: its own mds-credentials,
          // or the operator's where that namespace may fall back to it. Never a Secret that status names: status is
          // anyone's to write who may write it, and any Secret's value would be sent as a token. A Database's
          // spec.credentials went with it; its Connections are deleted first to revoke with that token.
          credentials = { namespace: dbNs, spec: {} };
          gone = true;
        } else {
          if (!allows(db, ns)) {
            // Refused before any call: nothing is minted. A change of the Database wakes this resource again. What an
            // earlier grant let it mint is revoked with the Database's token: on deletion, or now (withdrawn).
            const message = `database "${dbNs}/${ref.name}" does not allow Connections from namespace "${ns}": add "${ns}" to its spec.connectionPolicy.allowedNamespaces`;
            if (obj.status?.connection === undefined && remoteIdOf(obj) === undefined) {
              if (!deleting) throw new TerminalError("ReferenceNotAllowed", message);
              return nothingToDo;
            }
            if (!deleting) withdrawn = { reason: "ReferenceNotAllowed", message };
          }
          // ObserveOnly promises nothing is minted for the database, through any resource.
          if (!deleting && dbSpec?.managementPolicy === "ObserveOnly" && obj.status?.connection === undefined) {
            throw new TerminalError(
              "ReferenceNotAllowed",
              `database "${dbNs}/${ref.name}" is ObserveOnly: nothing is minted for it; set its managementPolicy to Full first`,
            );
          }
          credentials = { namespace: dbNs, spec: dbSpec ?? {} };
          // Minted only on the id the Database's own loop accepted (accepted.ts), never on what its status says.
          // A deletion revokes what was minted on the database it recorded: revocation checks each login's name at
          // the service, so a status naming another database revokes nothing there.
          databaseId = deleting
            ? (ctx.accepted.idOf(DatabaseType.kind, db) ?? obj.status?.databaseId)
            : acceptedDatabaseId(ctx.accepted, db, { namespace: dbNs, name: ref.name });
          if (databaseId === undefined) return nothingToDo;
        }
      }
      if (databaseId === undefined)
        throw new TerminalError("InvalidSpec", "set exactly one of databaseRef.name or databaseId");
      // By id, only with a token this namespace holds: the operator's own token is not lent to mint for any id.
      if (ref === undefined && obj.spec.credentials === undefined) {
        throw new TerminalError(
          "InvalidSpec",
          "a Connection by databaseId needs spec.credentials.secretRef (a token of the database's workspace in this namespace)",
        );
      }
      const api = await resolveCredentials(ctx, credentials.namespace, credentials.spec).catch((err: unknown) => {
        // The Database and its namespace's token are gone (its namespace deleted): nothing left to revoke with.
        if (gone && err instanceof WaitingError && err.reason === "CredentialsMissing") return undefined;
        throw err;
      });
      if (api === undefined) return nothingToDo;
      if (remoteIdOf(obj) !== undefined) await api.mirror.ready();
      return {
        ...createConnectionExternal({ api: api.api, mirror: api.mirror, instanceId: ctx.instanceId, databaseId }),
        credentials: api.use,
        withdrawn,
      };
    },
  };
}

export const connectionController = managedController(
  {
    kind: "Connection",
    type: ConnectionType,
    // A connection has nothing the loop updates remotely.
    steps: ["create", "secret", "rotate", "delete"],
    stallingReasons: ["ReferenceNotAllowed", ...remoteDatabaseStallingReasons],
    // A Database that gets its id, changes its policy or its credentials wakes its Connections, in any namespace.
    wakeOn: [
      {
        kind: DatabaseType.kind,
        keys: (db, connections) =>
          connections
            .list()
            .filter((c) => {
              const ref = readConnection(c)?.spec.databaseRef;
              return (
                ref?.name === db.metadata.name && (ref.namespace ?? c.metadata.namespace) === db.metadata.namespace
              );
            })
            .map((c) => `${c.metadata.namespace ?? ""}/${c.metadata.name}`),
      },
    ],
  },
  connectionHandler,
);
