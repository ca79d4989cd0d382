import type { CreateProjectBody, ProjectDatabase } from "../../contract/index.ts";
import { errorCode, isApiConflict, isApiNotFound, type MdsApi } from "../../operator/api.ts";
import { annotations } from "../../operator/connection-secret.ts";
import { connectionNameOf, credentialsFromCreated, idempotencyKeyOf, logicalIdOf } from "../../operator/identity.ts";
import type { Creation, Deletion, ExternalClient, Observation } from "../../operator/managed-reconciler.ts";
import { replayOrMint } from "../../operator/recover-credentials.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../../operator/remote-mirror.ts";
import { readinessOf, secretTargetOf } from "../database/external.ts";
import type { Project } from "./schema.ts";

export type ProjectObject = Project & { apiVersion: string; kind: string; metadata: Project["metadata"] & { name: string } };

export interface ProjectExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
}

export function recordedProjectId(obj: ProjectObject): string | undefined {
  return obj.spec.externalId ?? obj.status?.id ?? obj.metadata.annotations?.[annotations.externalId];
}

export function createProjectExternal(deps: ProjectExternalDeps): ExternalClient<ProjectObject> {
  const { api, mirror, instanceId } = deps;
  const logicalIdFor = (obj: ProjectObject) => logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const createKey = (obj: ProjectObject) => idempotencyKeyOf("create-project", logicalIdFor(obj));
  const bodyFor = (obj: ProjectObject): CreateProjectBody => ({
    name: obj.spec.displayName ?? obj.metadata.name,
    createDatabase: obj.spec.connectionSecret !== undefined,
    logicalId: logicalIdFor(obj),
    ...(obj.spec.region === undefined ? {} : { region: obj.spec.region }),
    ...(obj.spec.workspaceId === undefined ? {} : { workspaceId: obj.spec.workspaceId }),
  });
  const lookup = async (obj: ProjectObject) => (await api.listProjects({ logicalId: logicalIdFor(obj), limit: 1 })).data[0];

  /** Lookup before create: the mirror's full list proves absence without a call (see the Database client). */
  async function lookupBeforeCreate(obj: ProjectObject) {
    await mirror.ready().catch(() => undefined);
    const known = mirror.findProjectByLogicalId(logicalIdFor(obj));
    if (known.known && known.value === undefined) return undefined;
    return lookup(obj);
  }

  async function defaultDatabaseOf(projectId: string): Promise<RemoteDatabase | undefined> {
    let db = mirror.databasesOf(projectId).find((d) => d.isDefault);
    if (db === undefined) {
      db = (await api.listDatabases({ projectId, limit: 100 })).data.find((d) => d.isDefault);
      if (db !== undefined) mirror.putDatabase(db);
    } else if (db.status === "provisioning" || db.status === "recovering") {
      db = await mirror.getDatabase(db.id);
    }
    return db;
  }

  function asRemote(db: ProjectDatabase, project: { id: string; url: string; name: string }): RemoteDatabase {
    const { apiKeys: _a, connectionString: _s, directConnection: _d, ...rest } = db;
    return {
      ...rest,
      project,
      connections: db.connections.map((c) => ({
        ...c,
        directConnection: { ...c.directConnection, pass: "********" },
        endpoints: Object.fromEntries(Object.entries(c.endpoints).map(([k, e]) => [k, e === undefined ? e : { host: e.host, port: e.port }])),
      })),
    };
  }

  async function deleteById(id: string): Promise<Deletion> {
    const remaining = (await api.listDatabases({ projectId: id, limit: 100 }).catch((err: unknown) => {
      if (isApiNotFound(err)) return { data: [] as RemoteDatabase[] };
      throw err;
    })).data;
    const others = remaining.filter((d) => !d.isDefault);
    if (others.length > 0) {
      return {
        done: false,
        reason: "WaitingForDatabases",
        message: `Project "${id}" still has ${others.length} database(s) (${others.slice(0, 3).map((d) => d.id).join(", ")}); it is deleted after them`,
      };
    }
    for (const d of remaining) {
      try {
        await api.deleteDatabase(d.id);
      } catch (err) {
        if (!isApiNotFound(err)) throw err;
      }
      mirror.forgetDatabase(d.id);
    }
    try {
      await api.deleteProject(id);
    } catch (err) {
      if (isApiNotFound(err)) return { done: true };
      if (isApiConflict(err)) return { done: false, reason: "WaitingForDatabases", message: `Project "${id}" still has databases; waiting` };
      throw err;
    }
    return { done: true };
  }

  return {
    async observe(obj): Promise<Observation> {
      const id = recordedProjectId(obj);
      if (id === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "Creating", message: "" }, upToDate: true, fastPoll: true };
      const project = await mirror.getProject(id);
      if (project === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "RemoteNotFound", message: "" }, upToDate: true, fastPoll: false };
      const status: Record<string, unknown> = {
        id: project.id,
        url: project.url,
        workspace: { id: project.workspace.id, name: project.workspace.name },
        defaultRegion: project.defaultRegion,
      };
      if (obj.spec.connectionSecret === undefined) {
        return { exists: true, status, ready: { ok: true }, upToDate: true, fastPoll: false };
      }
      const db = await defaultDatabaseOf(project.id);
      if (db === undefined) {
        return {
          exists: true,
          status,
          ready: { ok: false, reason: "RemoteNotFound", message: `Project "${project.id}" has no default database` },
          upToDate: true,
          fastPoll: false,
        };
      }
      status["defaultDatabase"] = { id: db.id, name: db.name, status: db.status };
      return {
        exists: true,
        status,
        ready: readinessOf(db),
        upToDate: true,
        fastPoll: db.status === "provisioning" || db.status === "recovering",
        secret: secretTargetOf(obj, db, undefined),
      };
    },

    async create(obj): Promise<Creation> {
      const found = await lookupBeforeCreate(obj);
      if (found !== undefined) return { id: found.id, adopted: true, status: {} };
      let created;
      try {
        created = await api.createProject(bodyFor(obj), { idempotencyKey: createKey(obj) });
      } catch (err) {
        // 409 on our logicalId, or 422: our Idempotency-Key already created it with another body (spec edited since).
        if (isApiConflict(err) || errorCode(err) === "unprocessable") {
          const again = await lookup(obj);
          if (again !== undefined) return { id: again.id, adopted: true, status: {} };
        }
        throw err;
      }
      const { database: _database, ...project } = created;
      mirror.putProject(project);
      const status = { url: created.url, defaultRegion: created.defaultRegion, workspace: { id: created.workspace.id, name: created.workspace.name } };
      const db = created.database;
      if (db === null) return { id: created.id, adopted: false, status };
      const remote = asRemote(db, { id: created.id, url: created.url, name: created.name });
      mirror.putDatabase(remote);
      const connection = db.connections.find((c) => c.id === db.defaultConnectionId) ?? db.connections[0];
      if (connection === undefined) return { id: created.id, adopted: false, status };
      return {
        id: created.id,
        adopted: false,
        status: { ...status, defaultDatabase: { id: db.id, name: db.name, status: db.status } },
        credentials: credentialsFromCreated(connection),
        secret: secretTargetOf(obj, remote, connection.id),
      };
    },

    async update() {},

    async delete(obj) {
      const id = recordedProjectId(obj) ?? (obj.spec.externalId === undefined ? (await lookup(obj).catch(() => undefined))?.id : undefined);
      if (id === undefined) return { done: true };
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
          ours !== undefined && ours.id === target.projectId
            ? async () => {
                const replay = await api.createProject(bodyFor(obj), { idempotencyKey: createKey(obj) });
                const db = replay.database;
                return replay.id === ours.id && db?.id === target.databaseId ? db.connections.find((c) => c.id === db.defaultConnectionId) : undefined;
              }
            : undefined,
        // Read before minting: minting makes the mirror forget the database.
        originalConnectionId: ours !== undefined ? mirror.databasesOf(ours.id).find((d) => d.id === target.databaseId)?.defaultConnectionId : undefined,
      });
    },

    async revokeConnection(id) {
      try {
        await api.deleteConnection(id);
      } catch (err) {
        if (!isApiNotFound(err)) throw err;
      }
    },

    connectionStatus() {
      return {};
    },
  };
}
