import type { Connection, CreateProjectDatabaseBody, CreatedConnection, SourceBody } from "../../contract/index.ts";
import { errorCode, isApiConflict, isApiNotFound, type MdsApi } from "../../operator/api.ts";
import { annotations } from "../../operator/connection-secret.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { connectionNameOf, credentialsFromCreated, idempotencyKeyOf, logicalIdOf } from "../../operator/identity.ts";
import { replayOrMint } from "../../operator/recover-credentials.ts";
import { secretNameOf, type Creation, type ExternalClient, type Observation, type SecretTarget } from "../../operator/managed-reconciler.ts";
import type { MirroredConnection, MirroredDatabase as RemoteDatabase, RemoteMirror } from "../../operator/remote-mirror.ts";
import type { Database } from "./schema.ts";

// The Database kind's external client: thin, idempotent, returns data. The crash-safe create lives here:
// lookup by logicalId → POST with Idempotency-Key; credentials recovery by replay, else mint + revoke.

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

function endpointsOf(connection: MirroredConnection | undefined) {
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
  }
}

export function secretTargetOf(obj: { metadata: { name: string }; spec: { connectionSecret?: Database["spec"]["connectionSecret"] } }, db: RemoteDatabase, preferredConnectionId: string | undefined): SecretTarget | undefined {
  const connection = db.connections.find((c) => c.id === preferredConnectionId) ?? db.connections.find((c) => c.id === db.defaultConnectionId) ?? db.connections[0];
  const endpoints = endpointsOf(connection);
  if (endpoints === undefined) return undefined;
  return {
    name: secretNameOf(obj as never),
    spec: obj.spec.connectionSecret,
    databaseId: db.id,
    projectId: db.project.id,
    connections: db.connections.map((c) => ({ id: c.id, name: c.name })),
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

  async function bodyFor(obj: DatabaseObject): Promise<CreateProjectDatabaseBody> {
    const source = await sourceFor(obj);
    return {
      name: nameFor(obj),
      region: obj.spec.region ?? "inherit",
      isDefault: obj.spec.isDefault ?? false,
      logicalId: logicalIdFor(obj),
      ...(source === undefined ? {} : { source }),
    };
  }

  async function lookup(obj: DatabaseObject): Promise<RemoteDatabase | undefined> {
    const page = await api.listDatabases({ projectId, logicalId: logicalIdFor(obj), limit: 1 });
    return page.data[0];
  }

  /**
   * Lookup before create. The mirror's full list (made in this process, so it holds whatever a crashed predecessor
   * created) proves absence without a call of its own; a hit, or a mirror that cannot tell, asks the service per
   * object. Safety does not rest on this: the POST carries the logicalId and an Idempotency-Key, so a database
   * created since the list is replayed or answered 409 → adopted.
   */
  async function lookupBeforeCreate(obj: DatabaseObject): Promise<RemoteDatabase | undefined> {
    // One list serves a burst of creates; a failure here only means asking per object.
    await mirror.ready().catch(() => undefined);
    const known = mirror.findDatabaseByLogicalId(projectId, logicalIdFor(obj));
    if (known.known && known.value === undefined) return undefined;
    return lookup(obj);
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
          region: db.region.id,
          ...(secret === undefined ? {} : { endpoints: secret.endpoints }),
        },
        ready: readinessOf(db),
        upToDate: db.name === nameFor(obj) && (!(obj.spec.isDefault ?? false) || db.isDefault),
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
        created = await api.createProjectDatabase(projectId, await bodyFor(obj), { idempotencyKey: createKey(obj) });
      } catch (err) {
        // A concurrent or earlier create with our logicalId (409), or our own earlier POST whose response was lost,
        // sent again after the spec changed (422: the Idempotency-Key was used for another body): adopt it.
        if (isApiConflict(err) || errorCode(err) === "unprocessable") {
          const again = await lookup(obj);
          if (again !== undefined) return adopted(obj, again);
        }
        throw err;
      }
      const connection = created.connections.find((c) => c.id === created.defaultConnectionId) ?? created.connections[0];
      if (connection === undefined) throw new Error(`database "${created.id}" was created without a connection`);
      const { connections: _c, apiKeys: _a, connectionString: _s, directConnection: _d, ...rest } = created;
      const db: RemoteDatabase = { ...rest, connections: created.connections.map(stripSecrets) };
      mirror.putDatabase(db);
      return {
        id: created.id,
        adopted: false,
        status: { projectId: created.project.id, remoteStatus: created.status, region: created.region.id },
        credentials: credentialsFromCreated(connection),
        secret: secretTargetOf(obj, db, connection.id),
      };
    },

    async update(obj) {
      const id = recordedDatabaseId(obj);
      if (id === undefined) return;
      const db = await mirror.getDatabase(id);
      const body: { name?: string; isDefault?: true } = {};
      if (db?.name !== nameFor(obj)) body.name = nameFor(obj);
      if ((obj.spec.isDefault ?? false) && db?.isDefault !== true) body.isDefault = true;
      mirror.putDatabase(await api.updateDatabase(id, body));
    },

    async delete(obj) {
      const id = recordedDatabaseId(obj);
      if (id === undefined) {
        // Never created as far as we recorded; a create may still have landed: find it by logicalId.
        const found = obj.spec.externalId === undefined ? await lookup(obj).catch(() => undefined) : undefined;
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
        connectionName: connectionNameOf(obj.metadata.namespace ?? "default", obj.metadata.name),
        replay:
          ours !== undefined && ours.id === target.databaseId
            ? async () => {
                const replay = await api.createProjectDatabase(projectId, await bodyFor(obj), { idempotencyKey: createKey(obj) });
                return replay.id === target.databaseId ? replay.connections.find((c) => c.id === replay.defaultConnectionId) : undefined;
              }
            : undefined,
        // After a crash right after the POST the lost one is the original connection; an adopted (externalId)
        // database's other connections are not ours.
        originalConnectionId: ours?.defaultConnectionId,
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
      status: { projectId: db.project.id, remoteStatus: db.status, region: db.region.id },
      secret: secretTargetOf(obj, db, undefined),
    };
  }

  async function deleteById(id: string): Promise<{ done: true } | { done: false; reason: "WaitingForDatabases"; message: string }> {
    try {
      await api.deleteDatabase(id);
    } catch (err) {
      if (isApiNotFound(err)) return { done: true };
      if (isApiConflict(err)) {
        return { done: false, reason: "WaitingForDatabases", message: `Database "${id}" is its project's default database; it can be deleted once the project's other databases are gone` };
      }
      throw err;
    }
    mirror.forgetDatabase(id);
    return { done: true };
  }
}

function stripSecrets(c: CreatedConnection): Connection {
  const strip = (e: { host: string; port: number } | undefined) => (e === undefined ? undefined : { host: e.host, port: e.port });
  const direct = strip(c.endpoints.direct);
  const pooled = strip(c.endpoints.pooled);
  const accelerate = strip(c.endpoints.accelerate);
  return {
    ...c,
    directConnection: { ...c.directConnection, pass: "********" },
    endpoints: { ...(direct ? { direct } : {}), ...(pooled ? { pooled } : {}), ...(accelerate ? { accelerate } : {}) },
  };
}
