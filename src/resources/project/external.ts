import type { CreateProjectBody, PublicProjectDatabase } from "../../contract/index.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import {
  connectionNameOf,
  incarnationKeyOf,
  logicalIdOf,
  notCreatedHere,
  remoteIdOf,
} from "../../operator/identity.ts";
import type { Creation, ExternalClient, Observation } from "../../operator/managed-handler.ts";
import { connectionCalls } from "../../operator/secret/recovery.ts";
import { originalConnectionOf } from "../../operator/secret/revocation.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../remote/mirror.ts";
import { createOnce, findByLogicalId } from "../remote/create-once.ts";
import { createdWith, readinessWithSecret, secretTargetOf, stripSecrets } from "../remote/database.ts";
import { deleteProject } from "./deletion.ts";
import type { Project } from "./schema.ts";

export type ProjectObject = Project & {
  apiVersion: string;
  kind: string;
  metadata: Project["metadata"] & { name: string };
};

interface ProjectExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  /** The protected Database resource ("namespace/name") that manages this remote database, if any. */
  protectedBy: (databaseId: string) => Promise<string | undefined>;
  /** The id this Project's own loop accepted in this process (../../operator/accepted.ts), if any. */
  acceptedIdOf?: ((obj: ProjectObject) => string | undefined) | undefined;
}

// eslint-disable-next-line max-lines-per-function -- a factory: observe, create, update and delete share the client, mirror and ids in its closure; each is short
export function createProjectExternal(deps: ProjectExternalDeps): ExternalClient<ProjectObject> {
  const { api, mirror, instanceId } = deps;
  const logicalIdFor = (obj: ProjectObject) =>
    logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const createKey = (obj: ProjectObject) => incarnationKeyOf(obj, "create-project", logicalIdFor(obj));
  const bodyFor = (obj: ProjectObject): CreateProjectBody => ({
    name: obj.spec.displayName ?? obj.metadata.name,
    createDatabase: obj.spec.connectionSecret !== undefined,
    logicalId: logicalIdFor(obj),
    ...(obj.spec.region === undefined ? {} : { region: obj.spec.region }),
    ...(obj.spec.workspaceId === undefined ? {} : { workspaceId: obj.spec.workspaceId }),
  });
  const lookup = (obj: ProjectObject) =>
    findByLogicalId(() => api.listProjects({ logicalId: logicalIdFor(obj), limit: 1 }), "project", logicalIdFor(obj));

  /**
   * Whether the id this resource is bound to is its own, as for a Database (../database/external.ts). An adoption
   * (spec.externalId) is the spec's, checked against the token elsewhere. An id that only status.id or the id
   * annotation names is anyone's writing who may write them: it counts if this loop already accepted it in this
   * process, or if the project carries this resource's logicalId at the service (it created it). Otherwise a
   * status.id naming another namespace's project (seen through a shared token) made this resource rank as that
   * project's creator: it minted on its default database and, under deletionPolicy Delete, deleted it.
   */
  async function provenOwn(obj: ProjectObject): Promise<boolean> {
    const id = remoteIdOf(obj);
    if (id === undefined || obj.spec.externalId !== undefined) return true;
    if (deps.acceptedIdOf?.(obj) === id) return true;
    const logicalId = mirror.peekProject(id)?.logicalId;
    // A service that does not report logicalId with the project is asked by logicalId instead.
    if (typeof logicalId === "string") return logicalId === logicalIdFor(obj);
    return (await lookup(obj))?.id === id;
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

  function asRemote(db: PublicProjectDatabase, project: { id: string; url: string; name: string }): RemoteDatabase {
    return { ...db, project, connections: db.connections.map(stripSecrets) };
  }

  return {
    async observe(obj): Promise<Observation> {
      const id = remoteIdOf(obj);
      if (id === undefined)
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: "Creating", message: "" },
          drift: [],
          fastPoll: true,
        };
      if (!(await provenOwn(obj))) throw notCreatedHere("project", id);
      const project = await mirror.getProject(id);
      if (project === undefined)
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: "RemoteNotFound", message: "" },
          drift: [],
          fastPoll: false,
        };
      const status: Record<string, unknown> = {
        id: project.id,
        url: project.url,
        workspace: { id: project.workspace.id, name: project.workspace.name },
        ...(project.defaultRegion === null ? {} : { defaultRegion: project.defaultRegion }),
      };
      if (obj.spec.connectionSecret === undefined) {
        return { exists: true, status, ready: { ok: true }, drift: [], fastPoll: false };
      }
      const db = await defaultDatabaseOf(project.id);
      if (db === undefined) {
        return {
          exists: true,
          status,
          ready: { ok: false, reason: "RemoteNotFound", message: `Project "${project.id}" has no default database` },
          drift: [],
          fastPoll: false,
        };
      }
      status["defaultDatabase"] = { id: db.id, name: db.name, status: db.status };
      const secret = secretTargetOf(obj, db, obj.status?.connection?.id);
      return {
        exists: true,
        status,
        ready: readinessWithSecret(db, secret),
        drift: [],
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
      return createdWith(obj, created.id, withDb, db, remote);
    },

    async update() {},

    async delete(obj) {
      // Without a recorded id a create may still have landed; only the service's answer that there is none counts.
      const id = remoteIdOf(obj) ?? (obj.spec.externalId === undefined ? (await lookup(obj))?.id : undefined);
      if (id === undefined) return { done: true };
      // Deleted only if it is ours: an id that status or the annotation alone names must carry our logicalId.
      if (!(await provenOwn(obj))) return { done: true };
      return deleteProject(api, mirror, id, deps.protectedBy);
    },

    connections: connectionCalls<ProjectObject>({
      api,
      mirror,
      connectionName: (obj) =>
        connectionNameOf(instanceId, "Project", obj.metadata.namespace ?? "default", obj.metadata.name),
      // The database's original connection is ours when we created it; an adopted (externalId) one's is not.
      ownsOriginal: (obj) => obj.spec.externalId === undefined,
      async plan(obj, target) {
        const ours = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
        return {
          // Only a server that announced replay answers the same POST with the original response instead of acting.
          replay:
            ours !== undefined && ours.id === target.projectId && api.replaysIdempotencyKeys()
              ? async () => {
                  const replay = await api.createProject(bodyFor(obj), { idempotencyKey: createKey(obj) });
                  const db = replay.database;
                  return replay.id === ours.id && db?.id === target.databaseId
                    ? db.connections.find((c) => c.id === db.defaultConnectionId)
                    : undefined;
                }
              : undefined,
          // Read before minting: minting makes the mirror forget the database.
          originalConnectionId:
            ours !== undefined
              ? originalConnectionOf(mirror.databasesOf(ours.id).find((d) => d.id === target.databaseId))
              : undefined,
        };
      },
    }),
  };
}
