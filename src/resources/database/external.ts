import type { PublicBranch, SourceBody } from "../../contract/index.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { incarnationKeyOf, logicalIdOf, notCreatedHere, remoteIdOf } from "../../operator/identity.ts";
import type { Creation, Deletion, ExternalClient, Observation } from "../../operator/managed-handler.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../remote/mirror.ts";
import { createOnce, findByLogicalId } from "../remote/create-once.ts";
import { absent, createdWith, pollDelayOf, stripSecrets } from "../remote/database.ts";
import { branchStatusOf, deleteBranchIfEmpty, specBranch } from "./branch.ts";
import { createBodyOf } from "./create-body.ts";
import { databaseConnections } from "./connections.ts";
import { latestBackupStatus } from "./latest-backup.ts";
import { deleteDatabase } from "./deletion.ts";
import { adoptedCreation, observationOf, statusOf } from "./observation.ts";
import { cloneSourceOfSpec, sourceOf, sourceStatusOf } from "./source.ts";
import type { DatabaseObject } from "./schema.ts";

export type { DatabaseObject };

// The Database kind's external client: thin, idempotent, returns data. The crash-safe create lives here:
// lookup by logicalId → POST /v1/databases with logicalId (the service refuses a second database with it, 409) and an
// Idempotency-Key (our service replays it; the public API ignores it); credentials recovery by replay where the
// server announced it, else mint + revoke.

interface DatabaseExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  projectId: string;
  /** Remote id of a Database resource in the same namespace (for source.databaseRef). */
  databaseIdOf: (namespace: string, name: string) => string | undefined;
  crashPoint: (name: string) => void | Promise<void>;
  /** The id this Database's own loop accepted in this process (accepted.ts), if any. */
  acceptedIdOf?: ((obj: DatabaseObject) => string | undefined) | undefined;
  /** Whether (and how often) this Database's backups are read for status.latestBackup (latest-backup.ts). */
  backupTracking?: ((obj: DatabaseObject) => { refreshMs: number } | undefined) | undefined;
}

// eslint-disable-next-line max-lines-per-function -- closure factory: the calls share the lookup, the branch and the keys
export function createDatabaseExternal(deps: DatabaseExternalDeps): ExternalClient<DatabaseObject> {
  const { api, mirror, instanceId, projectId } = deps;
  const logicalIdFor = (obj: DatabaseObject) =>
    logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const nameFor = (obj: DatabaseObject) => obj.spec.displayName ?? obj.metadata.name;
  // An adopted database keeps its name unless spec.displayName asks for another: adoption renames nothing by itself.
  const wantedNameOf = (obj: DatabaseObject) =>
    obj.spec.externalId !== undefined && obj.spec.displayName === undefined ? undefined : nameFor(obj);

  const bodyWith = (obj: DatabaseObject, source: SourceBody | undefined, branch: PublicBranch | undefined) =>
    createBodyOf(obj, projectId, logicalIdFor(obj), source, branch);
  const branches = specBranch(api, projectId, deps.crashPoint);

  /** Ours, by logicalId: on spec.branch's branch (no branch yet: nothing can be on it), else in the project. */
  const lookup = async (obj: DatabaseObject) => {
    const branch = await branches.find(obj.spec.branch);
    if (obj.spec.branch !== undefined && branch === undefined) return undefined;
    const onBranch = branch === undefined ? {} : { branchId: branch.id };
    const logicalId = logicalIdFor(obj);
    return findByLogicalId(
      () => api.listDatabases({ projectId, logicalId, ...onBranch, limit: 1 }),
      "database",
      logicalId,
    );
  };

  /**
   * A preview branch goes (soft delete) with its last database; the service refuses while another is on it. The
   * branch is found from the spec in this project, never taken from status.branch.id: status is anyone's who may
   * write the subresource, and a forged id would name another branch the same token can delete.
   */
  async function withBranch(obj: DatabaseObject, deletion: Deletion): Promise<Deletion> {
    if (!deletion.done || obj.spec.branch?.role !== "preview") return deletion;
    const branch = (await branches.find(obj.spec.branch))?.id;
    if (branch !== undefined) await deleteBranchIfEmpty(api, branch);
    return deletion;
  }

  /**
   * Whether the id this resource is bound to is its own. An adoption (spec.externalId) is the spec's, checked against
   * the token elsewhere. Otherwise the id came from status.id or the id annotation, which are anyone's to write who
   * may write them: it counts if this loop already accepted it in this process, or if the database carries this
   * resource's logicalId at the service (it created it). So no status.id names another's database into this one,
   * after a restart neither.
   */
  async function provenOwn(obj: DatabaseObject, db?: RemoteDatabase): Promise<boolean> {
    const id = remoteIdOf(obj);
    if (id === undefined || obj.spec.externalId !== undefined) return true;
    if (deps.acceptedIdOf?.(obj) === id) return true;
    const logicalId = (db ?? mirror.peekDatabase(id))?.logicalId;
    // A service that does not report logicalId with the database is asked by logicalId instead.
    if (typeof logicalId === "string") return logicalId === logicalIdFor(obj);
    return (await lookup(obj))?.id === id;
  }

  // The uid names this object, not only its name: a Database deleted and applied again within the service's replay
  // window must not get the deleted one's answer (docs/design.md#keys-name-the-incarnation).
  const createKey = (obj: DatabaseObject) => incarnationKeyOf(obj, "create-database", logicalIdFor(obj), projectId);

  return {
    async observe(obj): Promise<Observation> {
      const id = remoteIdOf(obj);
      if (id === undefined) return absent("Creating");
      const known = mirror.peekDatabase(id);
      const db = await mirror.getDatabase(id, known?.status === "provisioning" ? pollDelayOf(known) : undefined);
      if (db === undefined) return absent("RemoteNotFound");
      if (!(await provenOwn(obj, db))) throw notCreatedHere("database", id);
      const observation = observationOf(obj, db, projectId, wantedNameOf(obj));
      if (db.status !== "ready") return observation;
      const latest = await latestBackupStatus(api, db.id, deps.backupTracking?.(obj));
      return { ...observation, status: { ...observation.status, ...latest } };
    },

    async create(obj): Promise<Creation> {
      let sent: SourceBody | undefined;
      let branch: PublicBranch | undefined;
      const result = await createOnce({
        mirror,
        logicalId: logicalIdFor(obj),
        known: () => mirror.findDatabaseByLogicalId(projectId, logicalIdFor(obj)),
        lookup: () => lookup(obj),
        post: async () => {
          // The source first: nothing is created, the branch included, while a clone's source is not ready.
          sent = await sourceOf(api, obj, deps.databaseIdOf);
          branch = await branches.ensure(obj.spec.branch, obj);
          return api.createDatabase(bodyWith(obj, sent, branch), { idempotencyKey: createKey(obj) });
        },
      });
      if ("adopted" in result) {
        // Ours, found by logicalId (a create whose answer was lost): its source is what the spec names.
        mirror.putDatabase(result.adopted);
        const creation = adoptedCreation(obj, result.adopted);
        const source = sourceStatusOf(cloneSourceOfSpec(obj, deps.databaseIdOf));
        const on = branchStatusOf(branch ?? (await branches.find(obj.spec.branch)));
        return { ...creation, status: { ...creation.status, ...source, ...on } };
      }
      const created = result.created;
      const db: RemoteDatabase = { ...created, connections: created.connections.map(stripSecrets) };
      mirror.putDatabase(db);
      const status = { ...statusOf(db), ...sourceStatusOf(sent), ...branchStatusOf(branch) };
      return createdWith(obj, created.id, status, created, db);
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
        if (found === undefined) return withBranch(obj, { done: true });
        return withBranch(obj, await deleteDatabase(api, mirror, found.id));
      }
      // Deleted only if it is ours: an id that status or the annotation alone names must carry our logicalId.
      if (!(await provenOwn(obj))) return { done: true };
      return withBranch(obj, await deleteDatabase(api, mirror, id));
    },

    connections: databaseConnections({
      api,
      mirror,
      instanceId,
      lookup,
      creation: async (obj) => ({
        body: bodyWith(obj, await sourceOf(api, obj, deps.databaseIdOf), await branches.find(obj.spec.branch)),
        idempotencyKey: createKey(obj),
      }),
    }),
  };
}
