import type { PublicCreatedConnection as CreatedConnection } from "../../contract/index.ts";
import type { MdsApi } from "./remote-api.ts";
import { ReconcileError, WaitingError } from "../../operator/errors.ts";
import { credentialsFromCreated } from "../../operator/secret/connection-credentials.ts";
import { originalConnectionOf } from "../../operator/secret/revocation.ts";
import type { Creation, Observation } from "../../operator/managed-handler.ts";
import type { MirroredConnection, MirroredDatabase as RemoteDatabase } from "./mirror.ts";
import type { SecretTarget } from "../../operator/secret/types.ts";
import { secretNameOf, type ConnectionSecretSpec } from "../../operator/secret/spec.ts";

// What the kinds that publish a database's credentials (Project for its default database, Database) read the same
// way from the service's answers: readiness, the Secret's target, credentials out of a creation response.

function endpointsOf(connection: Pick<MirroredConnection, "endpoints"> | undefined) {
  const direct = connection?.endpoints.direct;
  if (direct === undefined) return undefined;
  const pooled = connection?.endpoints.pooled;
  return {
    direct: { host: direct.host, port: direct.port },
    ...(pooled === undefined ? {} : { pooled: { host: pooled.host, port: pooled.port } }),
  };
}

/** A remote database the service reports failed needs a person: the kinds that show one are Stalled by it. */
export const remoteDatabaseStallingReasons = ["RemoteFailure"] as const;

/** No remote object (yet: `Creating`, polled fast; or gone: `RemoteNotFound`). */
export function absent(reason: "Creating" | "RemoteNotFound"): Observation {
  return {
    exists: false,
    status: {},
    ready: { ok: false, reason, message: "" },
    drift: [],
    fastPoll: reason === "Creating",
  };
}

/**
 * Fast polling that starts quick and backs off with the database's age: a database created 200 ms ago is looked
 * at again in 100 ms, one created seconds ago at the fast interval (the caller's cap).
 */
export function pollDelayOf(db: RemoteDatabase, now = Date.now()): number {
  const age = now - Date.parse(db.createdAt);
  return Number.isFinite(age) ? Math.max(100, Math.round(age / 2)) : 1_000;
}

function readinessOf(db: RemoteDatabase): Observation["ready"] {
  switch (db.status) {
    case "ready":
      return { ok: true };
    case "provisioning":
      return { ok: false, reason: "Provisioning", message: `The service is provisioning database "${db.id}"` };
    case "recovering":
      return { ok: false, reason: "Restoring", message: `A restore is replacing the data of database "${db.id}"` };
    case "failure":
      return {
        ok: false,
        reason: "RemoteFailure",
        message: `The service reports database "${db.id}" in status failure`,
      };
    default:
      return {
        ok: false,
        reason: "RemoteUnreadable",
        message: `The service reports database "${db.id}" in status "${db.status.slice(0, 40)}", which the operator does not know; waiting for a known status`,
      };
  }
}

/** Ready also needs a connection a Secret can be built from (the public API may list none with a direct endpoint). */
export function readinessWithSecret(db: RemoteDatabase, secret: SecretTarget | undefined): Observation["ready"] {
  const ready = readinessOf(db);
  if (!ready.ok || secret !== undefined) return ready;
  return {
    ok: false,
    reason: "RemoteIncomplete",
    message: `Database "${db.id}" has no connection with a direct endpoint to build the connection Secret from`,
  };
}

export function secretTargetOf(
  obj: { metadata: { name: string }; spec: { connectionSecret?: ConnectionSecretSpec | undefined } },
  db: RemoteDatabase,
  preferredConnectionId: string | undefined,
): SecretTarget | undefined {
  // Only connections with a direct endpoint can back a Secret (the public API also lists accelerate-only ones).
  const usable = db.connections.filter((c) => c.endpoints.direct !== undefined);
  const connection =
    usable.find((c) => c.id === preferredConnectionId) ??
    usable.find((c) => c.id === db.defaultConnectionId) ??
    usable[0];
  const endpoints = endpointsOf(connection);
  if (endpoints === undefined) return undefined;
  return {
    name: secretNameOf(obj),
    spec: obj.spec.connectionSecret,
    databaseId: db.id,
    projectId: db.project.id,
    connections: db.connections.map((c) => ({ id: c.id, name: c.name, endpoints: endpointsOf(c) })),
    originalConnectionId: originalConnectionOf(db),
    endpoints,
  };
}

/**
 * A creation answer: the id, and the credentials of its default connection for the Secret. Without usable credentials
 * in the answer the id is still recorded; the Secret is then built from a minted connection (the publisher's
 * recovery), and the answer's unusable one is revoked.
 */
export function createdWith(
  obj: { metadata: { name: string }; spec: { connectionSecret?: ConnectionSecretSpec | undefined } },
  id: string,
  status: Record<string, unknown>,
  answer: { defaultConnectionId?: string | null | undefined; connections: CreatedConnection[] },
  db: RemoteDatabase,
): Creation {
  const connection = answer.connections.find((c) => c.id === answer.defaultConnectionId) ?? answer.connections[0];
  const credentials = connection === undefined ? undefined : usableCredentials(connection);
  if (connection === undefined || credentials === undefined)
    return { id, adopted: false, status, secret: secretTargetOf(obj, db, undefined) };
  return { id, adopted: false, status, credentials, secret: secretTargetOf(obj, db, connection.id) };
}

/** The connection's credentials, or undefined when the answer lacks what a Secret needs. */
function usableCredentials(connection: CreatedConnection) {
  try {
    return credentialsFromCreated(connection);
  } catch (err) {
    if (err instanceof ReconcileError) return undefined;
    throw err;
  }
}

export function stripSecrets(c: CreatedConnection): MirroredConnection {
  const strip = (e: { host: string; port: number } | undefined) =>
    e === undefined ? undefined : { host: e.host, port: e.port };
  const direct = strip(c.endpoints.direct);
  const pooled = strip(c.endpoints.pooled);
  const accelerate = strip(c.endpoints.accelerate);
  return {
    id: c.id,
    type: c.type,
    name: c.name,
    createdAt: c.createdAt,
    kind: c.kind,
    endpoints: { ...(direct ? { direct } : {}), ...(pooled ? { pooled } : {}), ...(accelerate ? { accelerate } : {}) },
  };
}

/** The backup to restore or create from: the one named, else the source's latest completed one. */
export async function resolveBackup(
  api: MdsApi,
  sourceDatabaseId: string,
  backupId: string | undefined,
): Promise<string> {
  if (backupId !== undefined) return backupId;
  const backups = await api.listBackups(sourceDatabaseId, { limit: 100 });
  const latest = backups.data.find((b) => b.status === "completed");
  if (latest === undefined)
    throw new WaitingError("DatabaseNotReady", `database "${sourceDatabaseId}" has no completed backup yet`);
  return latest.id;
}
