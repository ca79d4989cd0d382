import type { CreateProjectBody, PublicProjectDatabase } from "../../contract/index.ts";
import { errorCode, isApiConflict, isApiNotFound, type MdsApi } from "../../operator/api.ts";
import { connectionNameOf, idempotencyKeyOf, logicalIdOf, remoteIdOf } from "../../operator/identity.ts";
import { messageOf } from "../../operator/errors.ts";
import type { Creation, Deletion, ExternalClient, Observation } from "../../operator/managed-reconciler.ts";
import { connectionOwner, originalConnectionOf } from "../../operator/recover-credentials.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../../operator/remote-mirror.ts";
import { createOnce, findByLogicalId } from "../create-once.ts";
import { readinessWithSecret, secretTargetOf, stripSecrets, usableCredentials } from "../remote-database.ts";
import type { Project } from "./schema.ts";

export type ProjectObject = Project & { apiVersion: string; kind: string; metadata: Project["metadata"] & { name: string } };

export interface ProjectExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
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
  const lookup = (obj: ProjectObject) => findByLogicalId(() => api.listProjects({ logicalId: logicalIdFor(obj), limit: 1 }), "project", logicalIdFor(obj));

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

  function asRemote(db: PublicProjectDatabase, project: { id: string; url: string; name: string }): RemoteDatabase {
    return { ...db, project, connections: db.connections.map(stripSecrets) };
  }

  /**
   * A project goes after its other databases (each Database resource deletes its own). Its default database: our
   * service deletes it alone once the others are gone, then the project; the public API refuses that (403) and
   * deletes it with the project. "Still has databases" (our 409, the public API's 400) is a wait, not an error.
   */
  async function deleteById(id: string): Promise<Deletion> {
    const listed: { data: RemoteDatabase[]; skipped?: number | undefined } = await api.listDatabases({ projectId: id, limit: 100 }).catch((err: unknown) => {
      if (isApiNotFound(err)) return { data: [] as RemoteDatabase[] };
      throw err;
    });
    const others = listed.data.filter((d) => !d.isDefault);
    if (others.length > 0 || (listed.skipped ?? 0) > 0) {
      const count = others.length + (listed.skipped ?? 0);
      return {
        done: false,
        reason: "WaitingForDatabases",
        message: `Project "${id}" still has ${count} database(s) (${others.slice(0, 3).map((d) => d.id).join(", ") || "unreadable"}); it is deleted after them`,
      };
    }
    for (const d of listed.data) {
      try {
        await api.deleteDatabase(d.id);
      } catch (err) {
        // 403: the public API deletes the default database only with its project, just below.
        if (!isApiNotFound(err) && errorCode(err) !== "forbidden") throw err;
      }
      mirror.forgetDatabase(d.id);
    }
    try {
      await api.deleteProject(id);
    } catch (err) {
      if (isApiNotFound(err)) return { done: true };
      if (isApiConflict(err) || errorCode(err) === "invalid_request") {
        return { done: false, reason: "WaitingForDatabases", message: `Project "${id}" still has databases (the service said: ${messageOf(err)}); waiting` };
      }
      throw err;
    }
    return { done: true };
  }

  return {
    async observe(obj): Promise<Observation> {
      const id = remoteIdOf(obj);
      if (id === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "Creating", message: "" }, upToDate: true, fastPoll: true };
      const project = await mirror.getProject(id);
      if (project === undefined) return { exists: false, status: {}, ready: { ok: false, reason: "RemoteNotFound", message: "" }, upToDate: true, fastPoll: false };
      const status: Record<string, unknown> = {
        id: project.id,
        url: project.url,
        workspace: { id: project.workspace.id, name: project.workspace.name },
        ...(project.defaultRegion === null ? {} : { defaultRegion: project.defaultRegion }),
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
      const secret = secretTargetOf(obj, db, undefined);
      return {
        exists: true,
        status,
        ready: readinessWithSecret(db, secret),
        upToDate: true,
        fastPoll: db.status === "provisioning" || db.status === "recovering",
        secret,
      };
    },

    async create(obj): Promise<Creation> {
      const result = await createOnce({
        mirror,
        logicalId: logicalIdFor(obj),
        known: () => mirror.findProjectByLogicalId(logicalIdFor(obj)),
        lookup: () => lookup(obj),
        post: () => api.createProject(bodyFor(obj), { idempotencyKey: createKey(obj) }),
      });
      if ("adopted" in result) return { id: result.adopted.id, adopted: true, status: {} };
      const created = result.created;
      const { database: _database, ...project } = created;
      mirror.putProject(project);
      const status = {
        url: created.url,
        ...(created.defaultRegion === null ? {} : { defaultRegion: created.defaultRegion }),
        workspace: { id: created.workspace.id, name: created.workspace.name },
      };
      const db = created.database;
      if (db === null) return { id: created.id, adopted: false, status };
      const remote = asRemote(db, { id: created.id, url: created.url, name: created.name });
      mirror.putDatabase(remote);
      const withDb = { ...status, defaultDatabase: { id: db.id, name: db.name, status: db.status } };
      const connection = db.connections.find((c) => c.id === db.defaultConnectionId) ?? db.connections[0];
      // Without usable credentials in the answer the Secret is built from a minted connection (recoverCredentials).
      const credentials = connection === undefined ? undefined : usableCredentials(connection);
      if (connection === undefined || credentials === undefined) return { id: created.id, adopted: false, status: withDb, secret: secretTargetOf(obj, remote, undefined) };
      return { id: created.id, adopted: false, status: withDb, credentials, secret: secretTargetOf(obj, remote, connection.id) };
    },

    async update() {},

    async delete(obj) {
      // Without a recorded id a create may still have landed; only the service's answer that there is none counts.
      const id = remoteIdOf(obj) ?? (obj.spec.externalId === undefined ? (await lookup(obj))?.id : undefined);
      if (id === undefined) return { done: true };
      return deleteById(id);
    },

    connections: connectionOwner<ProjectObject>({
      api,
      mirror,
      connectionName: (obj) => connectionNameOf(instanceId, "Project", obj.metadata.namespace ?? "default", obj.metadata.name),
      async plan(obj, target) {
        const ours = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
        return {
          // Only a server that announced replay answers the same POST with the original response instead of acting.
          replay:
            ours !== undefined && ours.id === target.projectId && api.replaysIdempotencyKeys()
              ? async () => {
                  const replay = await api.createProject(bodyFor(obj), { idempotencyKey: createKey(obj) });
                  const db = replay.database;
                  return replay.id === ours.id && db?.id === target.databaseId ? db.connections.find((c) => c.id === db.defaultConnectionId) : undefined;
                }
              : undefined,
          // Read before minting: minting makes the mirror forget the database.
          originalConnectionId: ours !== undefined ? originalConnectionOf(mirror.databasesOf(ours.id).find((d) => d.id === target.databaseId)) : undefined,
        };
      },
    }),
  };
}
