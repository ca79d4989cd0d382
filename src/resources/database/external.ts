import type { CreateDatabaseBody, SourceBody } from "../../contract/index.ts";
import { errorCode, isApiConflict, isApiNotFound, mayHaveLanded, type CreatedConnection, type MdsApi } from "../../operator/api.ts";
import { annotations } from "../../operator/connection-secret.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { connectionNameOf, credentialsFromCreated, idempotencyKeyOf, logicalIdOf } from "../../operator/identity.ts";
import { originalConnectionOf, replayOrMint } from "../../operator/recover-credentials.ts";
import { secretNameOf, type Creation, type Deletion, type ExternalClient, type Observation, type SecretTarget } from "../../operator/managed-reconciler.ts";
import type { MirroredConnection, MirroredDatabase as RemoteDatabase, RemoteMirror } from "../../operator/remote-mirror.ts";
import type { Database } from "./schema.ts";

// The Database kind's external client: thin, idempotent, returns data. The crash-safe create lives here:
// lookup by logicalId → POST /v1/databases with logicalId (the service refuses a second database with it, 409) and an
// Idempotency-Key (our service replays it; the public API ignores it); credentials recovery by replay where the
// server announced it, else mint + revoke.

export type DatabaseObject = Database & { apiVersion: string; kind: string; metadata: Database["metadata"] & { name: string } };

export interface DatabaseExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  projectId: string;
  /** Remote id of a Database resource in the same namespace (for source.databaseRef). */
  databaseIdOf: (namespace: string, name: string) => string | undefined;
}

export function recordedDatabaseId(obj: DatabaseObject): string | undefined {
  return obj.spec.externalId ?? obj.status?.id ?? obj.metadata.annotations?.[annotations.externalId];
}

function endpointsOf(connection: Pick<MirroredConnection, "endpoints"> | undefined) {
  const direct = connection?.endpoints.direct;
  if (direct === undefined) return undefined;
  const pooled = connection?.endpoints.pooled;
  return { direct: { host: direct.host, port: direct.port }, ...(pooled === undefined ? {} : { pooled: { host: pooled.host, port: pooled.port } }) };
}

/**
 * Fast polling that starts quick and backs off with the database's age: a database created 200 ms ago is looked
 * at again in 100 ms, one created seconds ago at the fast interval (the caller's cap).
 */
export function pollDelayOf(db: RemoteDatabase, now = Date.now()): number {
  const age = now - Date.parse(db.createdAt);
  return Number.isFinite(age) ? Math.max(100, Math.round(age / 2)) : 1_000;
}

export function readinessOf(db: RemoteDatabase): Observation["ready"] {
  switch (db.status) {
    case "ready":
      return { ok: true };
    case "provisioning":
      return { ok: false, reason: "Provisioning", message: `The service is provisioning database "${db.id}"` };
    case "recovering":
      return { ok: false, reason: "Restoring", message: `A restore is replacing the data of database "${db.id}"` };
    case "failure":
      return { ok: false, reason: "RemoteFailure", message: `The service reports database "${db.id}" in status failure` };
    default:
      return { ok: false, reason: "RemoteUnreadable", message: `The service reports database "${db.id}" in status "${db.status.slice(0, 40)}", which the operator does not know; waiting for a known status` };
  }
}

/** Ready also needs a connection a Secret can be built from (the public API may list none with a direct endpoint). */
export function readinessWithSecret(db: RemoteDatabase, secret: SecretTarget | undefined): Observation["ready"] {
  const ready = readinessOf(db);
  if (!ready.ok || secret !== undefined) return ready;
  return { ok: false, reason: "RemoteIncomplete", message: `Database "${db.id}" has no connection with a direct endpoint to build the connection Secret from` };
}

export function secretTargetOf(obj: { metadata: { name: string }; spec: { connectionSecret?: Database["spec"]["connectionSecret"] } }, db: RemoteDatabase, preferredConnectionId: string | undefined): SecretTarget | undefined {
  // Only connections with a direct endpoint can back a Secret (the public API also lists accelerate-only ones).
  const usable = db.connections.filter((c) => c.endpoints.direct !== undefined);
  const connection = usable.find((c) => c.id === preferredConnectionId) ?? usable.find((c) => c.id === db.defaultConnectionId) ?? usable[0];
  const endpoints = endpointsOf(connection);
  if (endpoints === undefined) return undefined;
  return {
    name: secretNameOf(obj as never),
    spec: obj.spec.connectionSecret,
    databaseId: db.id,
    projectId: db.project.id,
    connections: db.connections.map((c) => ({ id: c.id, name: c.name, endpoints: endpointsOf(c) })),
    endpoints,
  };
}

export function createDatabaseExternal(deps: DatabaseExternalDeps): ExternalClient<DatabaseObject> {
  const { api, mirror, instanceId, projectId } = deps;
  const logicalIdFor = (obj: DatabaseObject) => logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const nameFor = (obj: DatabaseObject) => obj.spec.displayName ?? obj.metadata.name;

  async function sourceFor(obj: DatabaseObject): Promise<SourceBody | undefined> {
    const s = obj.spec.source;
    if (s === undefined || s.type === "empty") return undefined;
    const ns = obj.metadata.namespace ?? "default";
    const sourceId = s.databaseId ?? (s.databaseRef === undefined ? undefined : deps.databaseIdOf(ns, s.databaseRef.name));
    if (sourceId === undefined) {
      throw new ReconcileError("DatabaseNotReady", `source database "${s.databaseRef?.name}" has no remote id yet; waiting for it`);
    }
    let backupId = s.backupId;
    if (backupId === undefined) {
      const backups = await api.listBackups(sourceId, { limit: 100 });
      backupId = backups.data.find((b) => b.status === "completed")?.id;
      if (backupId === undefined) throw new ReconcileError("DatabaseNotReady", `database "${sourceId}" has no completed backup yet`);
    }
    return { type: "backup", databaseId: sourceId, backupId };
  }

  async function bodyFor(obj: DatabaseObject): Promise<CreateDatabaseBody> {
    const source = await sourceFor(obj);
    return {
      projectId,
      name: nameFor(obj),
      region: obj.spec.region ?? "inherit",
      isDefault: obj.spec.isDefault ?? false,
      logicalId: logicalIdFor(obj),
      ...(source === undefined ? {} : { source }),
    };
  }

  /** The database with our logicalId; `undefined` only when the service said so (a failed lookup throws). */
  async function lookup(obj: DatabaseObject): Promise<RemoteDatabase | undefined> {
    const page = await api.listDatabases({ projectId, logicalId: logicalIdFor(obj), limit: 1 });
    const found = page.data[0];
    if (found === undefined && (page.skipped ?? 0) > 0) {
      throw new ReconcileError("RemoteUnreadable", `cannot tell whether database "${logicalIdFor(obj)}" exists: the service answered with a database the operator cannot read`);
    }
    return found;
  }

  /**
   * Lookup before create. The mirror's full list (made in this process, so it holds whatever a crashed predecessor
   * created) proves absence without a call of its own; a hit, a mirror that cannot tell, or a POST of ours whose
   * answer was lost asks the service per object. Safety does not rest on this: the POST carries the logicalId, so a
   * database created since the list is answered 409 (or replayed by our service) → adopted.
   */
  async function lookupBeforeCreate(obj: DatabaseObject): Promise<RemoteDatabase | undefined> {
    // One list serves a burst of creates; a failure here only means asking per object.
    await mirror.ready().catch(() => undefined);
    const known = mirror.findDatabaseByLogicalId(projectId, logicalIdFor(obj));
    if (known.known && known.value === undefined) return undefined;
    const found = await lookup(obj);
    mirror.settle(logicalIdFor(obj));
    return found;
  }

  const createKey = (obj: DatabaseObject) => idempotencyKeyOf("create-database", logicalIdFor(obj), projectId);

  return {
    async observe(obj): Promise<Observation> {
      const id = recordedDatabaseId(obj);
      if (id === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "Creating", message: "" }, upToDate: true, fastPoll: true };
      const known = mirror.peekDatabase(id);
      const db = await mirror.getDatabase(id, known?.status === "provisioning" ? pollDelayOf(known) : undefined);
      if (db === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "RemoteNotFound", message: "" }, upToDate: true, fastPoll: false };
      const preferred = (obj.status?.connection as { id?: string } | undefined)?.id;
      const secret = secretTargetOf(obj, db, preferred);
      return {
        exists: true,
        status: {
          id: db.id,
          projectId: db.project.id,
          remoteStatus: db.status,
          ...(db.region === null ? {} : { region: db.region.id }),
          ...(secret === undefined ? {} : { endpoints: secret.endpoints }),
        },
        ready: readinessWithSecret(db, secret),
        // isDefault is chosen at creation only: the public API cannot change it afterwards (its PATCH takes no isDefault).
        upToDate: db.name === nameFor(obj),
        fastPoll: db.status === "provisioning" || db.status === "recovering",
        pollAfterMs: db.status === "provisioning" ? pollDelayOf(db) : undefined,
        secret,
      };
    },

    async create(obj): Promise<Creation> {
      const found = await lookupBeforeCreate(obj);
      if (found !== undefined) return adopted(obj, found);
      let created;
      try {
        created = await api.createDatabase(await bodyFor(obj), { idempotencyKey: createKey(obj) });
      } catch (err) {
        // A concurrent or earlier create with our logicalId (409), or our own earlier POST whose response was lost,
        // sent again after the spec changed (422: the Idempotency-Key was used for another body): adopt it.
        if (isApiConflict(err) || errorCode(err) === "unprocessable") {
          const again = await lookup(obj);
          if (again !== undefined) return adopted(obj, again);
        }
        if (mayHaveLanded(err)) mirror.suspect(logicalIdFor(obj));
        throw err;
      }
      const db: RemoteDatabase = { ...created, connections: created.connections.map(stripSecrets) };
      mirror.putDatabase(db);
      const status = { projectId: created.project.id, remoteStatus: created.status, ...(created.region === null ? {} : { region: created.region.id }) };
      const connection = created.connections.find((c) => c.id === created.defaultConnectionId) ?? created.connections[0];
      // Without usable credentials in the answer the id is still recorded; the Secret is then built from a minted
      // connection, and the answer's unusable one is revoked (recoverCredentials).
      const credentials = connection === undefined ? undefined : usableCredentials(connection);
      if (connection === undefined || credentials === undefined) return { id: created.id, adopted: false, status, secret: secretTargetOf(obj, db, undefined) };
      return { id: created.id, adopted: false, status, credentials, secret: secretTargetOf(obj, db, connection.id) };
    },

    async update(obj) {
      const id = recordedDatabaseId(obj);
      if (id === undefined) return;
      // The name is all the public API's PATCH and ours have in common that the spec can change.
      mirror.putDatabase(await api.updateDatabase(id, { name: nameFor(obj) }));
    },

    async delete(obj) {
      const id = recordedDatabaseId(obj);
      if (id === undefined) {
        // Never created as far as we recorded; a create may still have landed: find it by logicalId. Only the
        // service's answer that there is none lets the finalizer go (a failed lookup throws and is retried).
        const found = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
        if (found === undefined) return { done: true };
        return deleteById(found.id);
      }
      return deleteById(id);
    },

    async recoverCredentials(obj, target, previousConnectionId) {
      const ours = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
      return replayOrMint({
        api,
        mirror,
        target,
        previousConnectionId,
        connectionName: connectionNameOf(instanceId, "Database", obj.metadata.namespace ?? "default", obj.metadata.name),
        // Only a server that announced replay answers the same POST with the original response instead of acting.
        replay:
          ours !== undefined && ours.id === target.databaseId && api.replaysIdempotencyKeys()
            ? async () => {
                const replay = await api.createDatabase(await bodyFor(obj), { idempotencyKey: createKey(obj) });
                return replay.id === target.databaseId ? replay.connections.find((c) => c.id === replay.defaultConnectionId) : undefined;
              }
            : undefined,
        // After a crash right after the POST the lost one is the original connection; an adopted (externalId)
        // database's other connections are not ours.
        originalConnectionId: originalConnectionOf(ours),
      });
    },

    async revokeConnection(id) {
      try {
        await api.deleteConnection(id);
      } catch (err) {
        if (!isApiNotFound(err)) throw err;
      }
    },

    connectionStatus(connectionId, target) {
      const c = target.connections.find((x) => x.id === connectionId);
      return { connection: { id: connectionId, name: c?.name ?? "" } };
    },
  };

  function adopted(obj: DatabaseObject, db: RemoteDatabase): Creation {
    mirror.putDatabase(db);
    return {
      id: db.id,
      adopted: true,
      status: { projectId: db.project.id, remoteStatus: db.status, ...(db.region === null ? {} : { region: db.region.id }) },
      secret: secretTargetOf(obj, db, undefined),
    };
  }

  async function deleteById(id: string): Promise<Deletion> {
    try {
      await api.deleteDatabase(id);
    } catch (err) {
      if (isApiNotFound(err)) return { done: true };
      if (isApiConflict(err)) {
        // Our service: the default database goes once the project's other databases are gone.
        return { done: false, reason: "WaitingForDatabases", message: `Database "${id}" is its project's default database; it can be deleted once the project's other databases are gone` };
      }
      // The public API: 403 for a project's default database, which it deletes only with its project. A 403 on
      // any other database is what it says (the token may not delete it).
      if (errorCode(err) === "forbidden" && (mirror.peekDatabase(id) ?? (await api.getDatabase(id))).isDefault) {
        return { done: false, reason: "WaitingForProject", message: `Database "${id}" is its project's default database; the service deletes it only with its project (delete the Project resource or the project)` };
      }
      throw err;
    }
    mirror.forgetDatabase(id);
    return { done: true };
  }
}

/** The connection's credentials, or undefined when the answer lacks what a Secret needs. */
export function usableCredentials(connection: CreatedConnection) {
  try {
    return credentialsFromCreated(connection);
  } catch (err) {
    if (err instanceof ReconcileError) return undefined;
    throw err;
  }
}

export function stripSecrets(c: CreatedConnection): MirroredConnection {
  const strip = (e: { host: string; port: number } | undefined) => (e === undefined ? undefined : { host: e.host, port: e.port });
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
