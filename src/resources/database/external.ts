import type { CreateDatabaseBody, SourceBody } from "../../contract/index.ts";
import type { MdsApi } from "../../operator/api.ts";
import { TerminalError } from "../../operator/errors.ts";
import {
  connectionNameOf,
  idempotencyKeyOf,
  logicalIdOf,
  notCreatedHere,
  remoteIdOf,
} from "../../operator/identity.ts";
import type { Creation, ExternalClient, Observation } from "../../operator/managed-kind.ts";
import { connectionOwner, originalConnectionOf } from "../../operator/recover-credentials.ts";
import type { MirroredDatabase as RemoteDatabase, RemoteMirror } from "../../operator/remote-mirror.ts";
import { boundToOwn, createOnce, findByLogicalId } from "../create-once.ts";
import { createdWith, pollDelayOf, readinessWithSecret, secretTargetOf, stripSecrets } from "../remote-database.ts";
import { latestBackupStatus } from "../database-backup/latest.ts";
import { deleteDatabase } from "./deletion.ts";
import { sourceOf } from "./source.ts";
import type { Database } from "./schema.ts";

// The Database kind's external client: thin, idempotent, returns data. The crash-safe create lives here:
// lookup by logicalId → POST /v1/databases with logicalId (the service refuses a second database with it, 409) and an
// Idempotency-Key (our service replays it; the public API ignores it); credentials recovery by replay where the
// server announced it, else mint + revoke.

export type DatabaseObject = Database & {
  apiVersion: string;
  kind: string;
  metadata: Database["metadata"] & { name: string };
};

export interface DatabaseExternalDeps {
  api: MdsApi;
  mirror: RemoteMirror;
  instanceId: string;
  projectId: string;
  /** Remote id of a Database resource in the same namespace (for source.databaseRef). */
  databaseIdOf: (namespace: string, name: string) => string | undefined;
  /** Whether (and how often) this Database's backups are read for status.latestBackup (database-backup/latest.ts). */
  backupTracking?: ((obj: DatabaseObject) => { refreshMs: number } | undefined) | undefined;
}

export function createDatabaseExternal(deps: DatabaseExternalDeps): ExternalClient<DatabaseObject> {
  const { api, mirror, instanceId, projectId } = deps;
  const logicalIdFor = (obj: DatabaseObject) =>
    logicalIdOf(instanceId, obj.metadata.namespace ?? "default", obj.metadata.name);
  const nameFor = (obj: DatabaseObject) => obj.spec.displayName ?? obj.metadata.name;
  // An adopted database keeps its name unless spec.displayName asks for another: adoption renames nothing by itself.
  const wantedNameOf = (obj: DatabaseObject) =>
    obj.spec.externalId !== undefined && obj.spec.displayName === undefined ? undefined : nameFor(obj);

  async function bodyFor(obj: DatabaseObject): Promise<CreateDatabaseBody> {
    const source = await sourceOf(api, obj, deps.databaseIdOf);
    return bodyWith(obj, source);
  }

  function bodyWith(obj: DatabaseObject, source: SourceBody | undefined): CreateDatabaseBody {
    return {
      projectId,
      name: nameFor(obj),
      region: obj.spec.region ?? "inherit",
      isDefault: obj.spec.isDefault ?? false,
      logicalId: logicalIdFor(obj),
      ...(source === undefined ? {} : { source }),
    };
  }

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
      if (id === undefined)
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: "Creating", message: "" },
          drift: [],
          fastPoll: true,
        };
      if (!(await boundToOwn(obj, () => lookup(obj)))) throw notCreatedHere("database", id);
      const known = mirror.peekDatabase(id);
      const db = await mirror.getDatabase(id, known?.status === "provisioning" ? pollDelayOf(known) : undefined);
      if (db === undefined)
        return {
          exists: false,
          status: {},
          ready: { ok: false, reason: "RemoteNotFound", message: "" },
          drift: [],
          fastPoll: false,
        };
      if (db.project.id !== projectId) {
        // Checked before anything is written or minted: an externalId (or an id annotation written by hand) may be a
        // typo, or another team's database in the same workspace.
        throw new TerminalError(
          "AdoptionRefused",
          `cannot adopt database "${db.id}": it belongs to project "${db.project.id}", not to this Database's project "${projectId}"; fix spec.externalId or the project reference`,
        );
      }
      const wantedName = wantedNameOf(obj);
      const secret = secretTargetOf(obj, db, obj.status?.connection?.id);
      return {
        exists: true,
        status: {
          id: db.id,
          ...statusOf(db),
          ...(secret === undefined ? {} : { endpoints: secret.endpoints }),
          ...(db.status === "ready" ? await latestBackupStatus(api, db.id, deps.backupTracking?.(obj)) : {}),
        },
        ready: readinessWithSecret(db, secret),
        // isDefault is chosen at creation only: the public API cannot change it afterwards (its PATCH takes no isDefault).
        drift:
          wantedName === undefined || db.name === wantedName
            ? []
            : [{ field: "displayName", desired: wantedName, actual: db.name }],
        fastPoll: db.status === "provisioning" || db.status === "recovering",
        pollAfterMs: db.status === "provisioning" ? pollDelayOf(db) : undefined,
        secret,
      };
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
        const creation = adopted(obj, result.adopted);
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

    connections: connectionOwner<DatabaseObject>({
      api,
      mirror,
      connectionName: (obj) =>
        connectionNameOf(instanceId, "Database", obj.metadata.namespace ?? "default", obj.metadata.name),
      // The database's original connection is ours when we created it; an adopted (externalId) one's is not.
      ownsOriginal: (obj) => obj.spec.externalId === undefined,
      async plan(obj, target) {
        const ours = obj.spec.externalId === undefined ? await lookup(obj) : undefined;
        return {
          // Only a server that announced replay answers the same POST with the original response instead of acting.
          replay:
            ours !== undefined && ours.id === target.databaseId && api.replaysIdempotencyKeys()
              ? async () => {
                  const replay = await api.createDatabase(await bodyFor(obj), { idempotencyKey: createKey(obj) });
                  return replay.id === target.databaseId
                    ? replay.connections.find((c) => c.id === replay.defaultConnectionId)
                    : undefined;
                }
              : undefined,
          // After a crash right after the POST the lost one is the original connection; an adopted (externalId)
          // database's other connections are not ours.
          originalConnectionId: originalConnectionOf(ours),
        };
      },
    }),
  };

  function adopted(obj: DatabaseObject, db: RemoteDatabase): Creation {
    mirror.putDatabase(db);
    return {
      id: db.id,
      adopted: true,
      status: statusOf(db),
      secret: secretTargetOf(obj, db, undefined),
    };
  }
}

/** status.source: what the database was created from, as sent (nothing for an empty one). */
function sourceStatusOf(source: SourceBody | undefined): { source?: SourceBody } {
  return source === undefined || source.type === "empty" ? {} : { source };
}

/** A clone's source as the spec names it, without asking the service (for a create found again by logicalId). */
function cloneSourceOfSpec(
  obj: DatabaseObject,
  databaseIdOf: DatabaseExternalDeps["databaseIdOf"],
): SourceBody | undefined {
  const s = obj.spec.source;
  if (s?.type !== "database") return undefined;
  const id =
    s.databaseId ??
    (s.databaseRef === undefined ? undefined : databaseIdOf(obj.metadata.namespace ?? "default", s.databaseRef.name));
  return id === undefined ? undefined : { type: "database", databaseId: id };
}

function statusOf(db: RemoteDatabase) {
  return { projectId: db.project.id, remoteStatus: db.status, ...(db.region === null ? {} : { region: db.region.id }) };
}
