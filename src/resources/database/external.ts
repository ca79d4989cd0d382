import type { CreateDatabaseBody, SourceBody } from "../../contract/index.ts";
import type { MdsApi } from "../remote-api.ts";
import { idempotencyKeyOf, logicalIdOf, notCreatedHere, remoteIdOf } from "../../operator/identity.ts";
import type { Creation, ExternalClient, Observation } from "../../operator/managed-handler.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../remote-mirror.ts";
import { boundToOwn, createOnce, findByLogicalId } from "../create-once.ts";
import { absent, createdWith, pollDelayOf, stripSecrets } from "../remote-database.ts";
import { databaseConnections } from "./connections.ts";
import { deleteDatabase } from "./deletion.ts";
import { adoptedCreation, observationOf, statusOf } from "./observation.ts";
import { cloneSourceOfSpec, sourceOf, sourceStatusOf } from "./source.ts";
import type { DatabaseObject } from "./schema.ts";

export type { DatabaseObject };

// The Database kind's external client: thin, idempotent, returns data. The crash-safe create lives here:
// lookup by logicalId → POST /v1/databases with logicalId (the service refuses a second database with it, 409) and an
// Idempotency-Key (our service replays it; the public API ignores it); credentials recovery by replay where the
// server announced it, else mint + revoke.

export interface DatabaseExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  projectId: string;
  /** Remote id of a Database resource in the same namespace (for source.databaseRef). */
  databaseIdOf: (namespace: string, name: string) => string | undefined;
}

export function createDatabaseExternal(deps: DatabaseExternalDeps): ExternalClient<DatabaseObject> {
  const { api, mirror, instanceId, projectId } = deps;
  const logicalIdFor = (obj: DatabaseObject) =>
    logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const nameFor = (obj: DatabaseObject) => obj.spec.displayName ?? obj.metadata.name;
  // An adopted database keeps its name unless spec.displayName asks for another: adoption renames nothing by itself.
  const wantedNameOf = (obj: DatabaseObject) =>
    obj.spec.externalId !== undefined && obj.spec.displayName === undefined ? undefined : nameFor(obj);

  const bodyWith = (obj: DatabaseObject, source: SourceBody | undefined) =>
    createBodyOf(obj, projectId, logicalIdFor(obj), source);

  const lookup = (obj: DatabaseObject) =>
    findByLogicalId(
      () => api.listDatabases({ projectId, logicalId: logicalIdFor(obj), limit: 1 }),
      "database",
      logicalIdFor(obj),
    );

  const createKey = (obj: DatabaseObject) => idempotencyKeyOf("create-database", logicalIdFor(obj), projectId);

  return {
    async observe(obj): Promise<Observation> {
      const id = remoteIdOf(obj);
      if (id === undefined) return absent("Creating");
      if (!(await boundToOwn(obj, () => lookup(obj)))) throw notCreatedHere("database", id);
      const known = mirror.peekDatabase(id);
      const db = await mirror.getDatabase(id, known?.status === "provisioning" ? pollDelayOf(known) : undefined);
      if (db === undefined) return absent("RemoteNotFound");
      return observationOf(obj, db, projectId, wantedNameOf(obj));
    },

    async create(obj): Promise<Creation> {
      let sent: SourceBody | undefined;
      const result = await createOnce({
        mirror,
        logicalId: logicalIdFor(obj),
        known: () => mirror.findDatabaseByLogicalId(projectId, logicalIdFor(obj)),
        lookup: () => lookup(obj),
        post: async () => {
          sent = await sourceOf(api, obj, deps.databaseIdOf);
          return api.createDatabase(bodyWith(obj, sent), { idempotencyKey: createKey(obj) });
        },
      });
      if ("adopted" in result) {
        // Ours, found by logicalId (a create whose answer was lost): its source is what the spec names.
        mirror.putDatabase(result.adopted);
        const creation = adoptedCreation(obj, result.adopted);
        const source = sourceStatusOf(cloneSourceOfSpec(obj, deps.databaseIdOf));
        return { ...creation, status: { ...creation.status, ...source } };
      }
      const created = result.created;
      const db: RemoteDatabase = { ...created, connections: created.connections.map(stripSecrets) };
      mirror.putDatabase(db);
      return createdWith(obj, created.id, { ...statusOf(db), ...sourceStatusOf(sent) }, created, db);
    },

    async update(obj) {
      const id = remoteIdOf(obj);
      const name = wantedNameOf(obj);
      if (id === undefined || name === undefined) return;
      // The name is all the public API's PATCH and ours have in common that the spec can change.
      mirror.putDatabase(await api.updateDatabase(id, { name }));
    },

    async delete(obj) {
      const id = remoteIdOf(obj);
      if (id === undefined) {
        // Never created as far as we recorded; a create may still have landed: find it by logicalId. Only the
        // service's answer that there is none lets the finalizer go (a failed lookup throws and is retried).
        const found = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
        if (found === undefined) return { done: true };
        return deleteDatabase(api, mirror, found.id);
      }
      // Deleted only if it is ours: an id annotation alone must match our logicalId.
      if (!(await boundToOwn(obj, () => lookup(obj)))) return { done: true };
      return deleteDatabase(api, mirror, id);
    },

    connections: databaseConnections({
      api,
      mirror,
      instanceId,
      lookup,
      creation: async (obj) => ({
        body: bodyWith(obj, await sourceOf(api, obj, deps.databaseIdOf)),
        idempotencyKey: createKey(obj),
      }),
    }),
  };
}

/** The creation request of `obj`: the same body every time (a replay must match the first POST). */
function createBodyOf(
  obj: DatabaseObject,
  projectId: string,
  logicalId: string,
  source: SourceBody | undefined,
): CreateDatabaseBody {
  return {
    projectId,
    name: obj.spec.displayName ?? obj.metadata.name,
    region: obj.spec.region ?? "inherit",
    isDefault: obj.spec.isDefault ?? false,
    logicalId,
    ...(source === undefined ? {} : { source }),
  };
}
