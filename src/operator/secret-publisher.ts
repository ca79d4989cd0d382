import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { isKubeNotFound } from "../kube/errors.ts";
import { SecretType, type KubeObject, type OwnerReference, type Secret } from "../kube/types.ts";
import {
  annotations,
  buildSecret,
  credentialsFromSecret,
  labels,
  managedByValue,
  secretUpToDate,
  type ConnectionCredentials,
  type ConnectionSecretSpec,
  type Endpoint,
} from "./connection-secret.ts";
import { ReconcileError, TerminalError } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { retryInProcess } from "./outcome.ts";
import { rotateStep, rotationPolicyOf, type RotationStatus } from "./rotation.ts";

// The connection Secret as a component (docs/design.md#the-secrets-write-order): publish the credentials of a creation, keep the Secret current (rebuild a
// missing or edited one, recover lost credentials, revoke the connections whose password nobody holds), release it
// (Retain) or delete it (Delete). Used by the managed loop for any kind that publishes credentials; the credential
// calls themselves come from the kind (ConnectionOwner, built with connectionOwner() in recover-credentials.ts).

export type SecretEndpoints = { direct: Endpoint; pooled?: Endpoint | undefined };

/** Where and for what the connection Secret is published. */
export interface SecretTarget {
  name: string;
  spec: ConnectionSecretSpec | undefined;
  databaseId: string;
  projectId: string | undefined;
  /**
   * The remote database's connections: a Secret naming another one holds revoked credentials. Each one's endpoints
   * as the service reports them now: a Secret follows its own connection's hosts and ports when they move.
   */
  connections: { id: string; name: string; endpoints?: SecretEndpoints | undefined }[];
  /** The connection the server made together with the database (recover-credentials.ts, originalConnectionOf). */
  originalConnectionId?: string | undefined;
  /** The endpoints of the connection a new Secret is built from. */
  endpoints: SecretEndpoints;
}

/**
 * What a revocation did: `revoked`; `absent` (not a connection of the database: gone already, or never its own);
 * `refused` (a connection of the database this resource did not mint: nothing was called).
 */
export type RevokeResult = "revoked" | "absent" | "refused";

/** A kind's credential calls: what the publisher needs to recover lost credentials and revoke what was lost. */
export interface ConnectionOwner<T> {
  /**
   * Whether `id` is one of this resource's own connections on the target database (its names, or the original
   * connection of a database it created), by the service's list in `target`. What a Secret, an annotation or a
   * status names is trusted only when this holds.
   */
  owns(obj: T, target: SecretTarget, id: string): boolean;
  /**
   * Credentials for a Secret that is missing, edited or names a revoked connection; `revoke`: connections lost.
   * `keep`: connections that live on whatever happens (one being retired after a rotation).
   */
  recover(
    obj: T,
    target: SecretTarget,
    previousConnectionId: string | undefined,
    keep: string[],
  ): Promise<{ credentials: ConnectionCredentials; revoke: string[] }>;
  /** A new connection for a rotation, named with `suffix`; `leaked`: earlier mints of that name nobody holds. */
  mint(obj: T, target: SecretTarget, suffix: string): Promise<{ credentials: ConnectionCredentials; leaked: string[] }>;
  /**
   * Revokes a connection of `databaseId` only if it is this resource's own, checked against the service's list
   * read just before (whatever asked for it: an annotation, a label and a status are anyone's to write).
   */
  revoke(obj: T, databaseId: string, id: string): Promise<RevokeResult>;
}

/** The resource that publishes the Secret, as far as the publisher needs it. */
export interface Publisher extends KubeObject {
  apiVersion: string;
  kind: string;
  spec: { deletionPolicy?: "Retain" | "Delete" | undefined };
  /** status.connection: the connection the Secret was last published with (written by publishedStatus). */
  status?:
    | { connection?: { id: string } | undefined; rotation?: RotationStatus | undefined; [key: string]: unknown }
    | undefined;
}

/** The status fields that name the published Secret and connection (status.binding: servicebinding.io). */
export function publishedStatus(target: SecretTarget, connectionId: string): Record<string, unknown> {
  const name = target.connections.find((c) => c.id === connectionId)?.name ?? "";
  return { secretName: target.name, binding: { name: target.name }, connection: { id: connectionId, name } };
}

export interface PublisherDeps {
  kube: KubeClient;
  /** The labelled Secret cache. */
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined };
  events: EventRecorder;
  log: Logger;
  crashPoint: (name: string) => void | Promise<void>;
}

/**
 * Only under deletionPolicy Delete does the Secret get an ownerReference (garbage collection as a backstop).
 * Under Retain it never has one: `kubectl delete --cascade=foreground` makes the garbage collector delete owned
 * objects before any finalizer could release them, and these credentials exist nowhere else.
 */
export function ownerReferenceOf(obj: Publisher): OwnerReference | undefined {
  if (obj.metadata.uid === undefined || (obj.spec.deletionPolicy ?? "Retain") !== "Delete") return undefined;
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    uid: obj.metadata.uid,
    controller: true,
    blockOwnerDeletion: false,
  };
}

export function connectionSecrets<T extends Publisher>(deps: PublisherDeps, obj: T) {
  const ns = obj.metadata.namespace;
  const point = (name: string) => deps.crashPoint(`${obj.kind.toLowerCase()}:${name}`);

  function assertUsable(existing: Secret | undefined, target: SecretTarget) {
    if (existing === undefined) return;
    if (existing.metadata.labels?.[labels.managedBy] !== managedByValue) {
      throw new TerminalError(
        "InvalidSpec",
        `cannot write connection Secret "${target.name}": a Secret of that name exists and is not managed by mds-operator; delete it or set connectionSecret.name to another name`,
      );
    }
    const ownedByOther = (existing.metadata.ownerReferences ?? []).some(
      (r) => r.controller === true && r.uid !== obj.metadata.uid,
    );
    const otherDb = existing.metadata.labels?.[labels.databaseId] !== target.databaseId;
    if (ownedByOther || otherDb) {
      throw new ReconcileError(
        "InvalidSpec",
        `cannot write connection Secret "${target.name}": it holds the credentials of ${otherDb ? `database "${existing.metadata.labels?.[labels.databaseId]}"` : "another resource"}; choose another connectionSecret.name`,
      );
    }
  }

  async function write(
    existing: Secret | undefined,
    target: SecretTarget,
    credentials: ConnectionCredentials,
    toRevoke: string[] = [],
  ): Promise<void> {
    const desired = buildSecret({
      namespace: ns ?? "default",
      name: target.name,
      credentials,
      spec: target.spec,
      projectId: target.projectId,
      databaseId: target.databaseId,
      owner: ownerReferenceOf(obj),
      ownerName: `${obj.kind}/${obj.metadata.name}`,
    });
    if (toRevoke.length > 0)
      desired.metadata.annotations = { ...desired.metadata.annotations, [annotations.revoke]: toRevoke.join(",") };
    if (existing === undefined) {
      await deps.kube.create(SecretType, desired);
      return;
    }
    if (secretUpToDate(existing, desired)) return;
    if ((existing.type ?? "Opaque") !== desired.type) {
      // A Secret's type is immutable (servicebinding.io form switched on or off): replace it whole, ours only. From
      // the live copy: a cached one may lack an annotation written since (a restore's ledger).
      const live = (await deps.kube.get<Secret>(SecretType, ns, target.name)) ?? existing;
      await deps.kube.delete(
        SecretType,
        ns,
        target.name,
        live.metadata.uid === undefined ? {} : { uid: live.metadata.uid },
      );
      desired.metadata.labels = { ...live.metadata.labels, ...desired.metadata.labels };
      desired.metadata.annotations = { ...live.metadata.annotations, ...desired.metadata.annotations };
      await deps.kube.create(SecretType, desired);
      return;
    }
    // Keep labels and annotations others added (a restore's ledger among them); ours win.
    desired.metadata.labels = { ...existing.metadata.labels, ...desired.metadata.labels };
    desired.metadata.annotations = { ...existing.metadata.annotations, ...desired.metadata.annotations };
    desired.metadata.resourceVersion = existing.metadata.resourceVersion ?? "";
    await deps.kube.replace(SecretType, desired);
  }

  /** Says why a connection was not revoked: no remote call was made for it. */
  function refused(id: string, databaseId: string, source: string) {
    deps.log.warn(
      { connectionId: id, databaseId, source },
      "Refused to revoke a connection this resource did not mint",
    );
    deps.events.record(
      obj,
      "Warning",
      "RevokeRefused",
      `Did not revoke connection "${id}" (named by ${source}): it is not a connection this ${obj.kind} minted on database "${databaseId}"`,
    );
  }

  /** Revokes one of this resource's own connections; a failure is logged, not thrown. */
  async function revoke(
    owner: ConnectionOwner<T>,
    target: SecretTarget,
    id: string,
    why = "whose credentials were lost",
    source = "the operator's records",
  ) {
    try {
      const result = await owner.revoke(obj, target.databaseId, id);
      if (result === "refused") refused(id, target.databaseId, source);
      else if (result === "revoked")
        deps.events.record(obj, "Normal", "ConnectionRevoked", `Revoked connection "${id}" ${why}`);
    } catch (err) {
      deps.log.warn({ err, connectionId: id }, "Could not revoke a lost connection");
    }
  }

  /**
   * A crash between a rebuilt Secret's write and the revocation leaves status naming the replaced connection, whose
   * password nobody holds any more: revoke it now. Only when the live Secret confirms it holds another connection
   * (a lagging cache must never get the published connection revoked). Steady state: no call.
   */
  async function revokeReplaced(owner: ConnectionOwner<T>, target: SecretTarget, published: string) {
    // A rotation in progress replaced it on purpose, or it is retiring: it goes after its grace period (rotation.ts).
    if (obj.status?.rotation?.pending !== undefined) return;
    const recorded = obj.status?.connection?.id;
    if (recorded !== undefined && recorded === obj.status?.rotation?.retiring?.id) return;
    if (recorded === undefined || recorded === published || !target.connections.some((c) => c.id === recorded)) return;
    const live = await deps.kube.get<Secret>(SecretType, ns, target.name);
    if (live?.metadata.labels?.[labels.connectionId] !== published) return;
    await revoke(owner, target, recorded, undefined, "status.connection");
  }

  /**
   * Revokes what the Secret's revoke annotation lists (never what it names now, nor the retiring one), then clears
   * it. Anyone who can write the Secret can write the list: only this resource's own connections are revoked.
   */
  async function revokeNoted(
    owner: ConnectionOwner<T>,
    target: SecretTarget,
    seen: Secret | undefined,
    current: string,
  ) {
    if (seen?.metadata.annotations?.[annotations.revoke] === undefined) return;
    const secret = await deps.kube.get<Secret>(SecretType, ns, seen.metadata.name);
    const noted = secret?.metadata.annotations?.[annotations.revoke];
    if (secret === undefined || noted === undefined) return;
    const retiring = obj.status?.rotation?.retiring?.id;
    // At most as many as a recovery writes, and ids only: a longer list was not written by the operator.
    const ids = [...new Set(noted.split(",").filter((id) => id !== "" && id !== current && id !== retiring))].slice(
      0,
      16,
    );
    const revoked: string[] = [];
    // A failed revocation throws: the list stays for the next reconcile.
    for (const id of ids) {
      const result = await owner.revoke(obj, target.databaseId, id);
      if (result === "refused")
        refused(
          id.slice(0, 80),
          target.databaseId,
          `the annotation ${annotations.revoke} on Secret "${secret.metadata.name}"`,
        );
      if (result === "revoked") revoked.push(id);
    }
    if (revoked.length > 0)
      deps.events.record(
        obj,
        "Normal",
        "ConnectionRevoked",
        `Revoked connections whose credentials were lost: ${revoked.join(",")}`,
      );
    await deps.kube.patch(SecretType, ns, secret.metadata.name, {
      metadata: { resourceVersion: secret.metadata.resourceVersion, annotations: { [annotations.revoke]: null } },
    });
  }

  /** Credentials that exist nowhere else (a creation or rotation answer): the Secret goes first, retried in process. */
  async function publishOnly(target: SecretTarget, credentials: ConnectionCredentials): Promise<string> {
    await retryInProcess(
      async () => {
        const existing = await deps.kube.get<Secret>(SecretType, ns, target.name);
        assertUsable(existing, target);
        await write(existing, target, credentials);
      },
      {
        onRetry: (err, attempt) => deps.log.debug({ err, attempt }, "Could not write the connection Secret; retrying"),
      },
    );
    return credentials.connectionId;
  }

  return {
    publishCreated: publishOnly,

    /** Rotation with overlap (rotation.ts): status fields to merge, and when to look again. */
    async rotate(
      owner: ConnectionOwner<T>,
      target: SecretTarget,
      published: string,
      spec: ConnectionSecretSpec | undefined,
      saveStatus: (fields: Record<string, unknown>) => Promise<void>,
    ) {
      const rotated = await rotateStep({
        obj,
        owner,
        target,
        published,
        policy: rotationPolicyOf(spec),
        now: Date.now(),
        publish: (credentials) => publishOnly(target, credentials).then(() => undefined),
        // Only one of this resource's own: the label is anyone's to write who can write the Secret.
        liveConnectionId: async () => {
          const id = (await deps.kube.get<Secret>(SecretType, ns, target.name))?.metadata.labels?.[labels.connectionId];
          return id !== undefined && owner.owns(obj, target, id) ? id : undefined;
        },
        revoke: (id, why) => revoke(owner, target, id, why, "a rotation's record"),
        retire: async (id) => {
          const result = await owner.revoke(obj, target.databaseId, id);
          if (result === "refused") refused(id, target.databaseId, "status.rotation.retiring");
          if (result === "revoked")
            deps.events.record(
              obj,
              "Normal",
              "ConnectionRevoked",
              `Revoked connection "${id}": its grace period after a rotation ended`,
            );
        },
        saveStatus,
        crashPoint: point,
        record: (reason, message) => deps.events.record(obj, "Normal", reason, message),
      });
      return {
        fields: { ...publishedStatus(target, rotated.connectionId), rotation: rotated.rotation },
        wakeInMs: rotated.wakeInMs,
      };
    },

    /** Makes the Secret current; returns the connection id whose credentials it holds. */
    async ensureCurrent(owner: ConnectionOwner<T>, target: SecretTarget): Promise<string> {
      const fromCache = deps.secrets.get(ns, target.name);
      // Kept credentials with the endpoints the service reports now for their connection: a moved host or port is
      // rewritten into the Secret without minting anything. Only a connection of this resource's own counts: a
      // Secret is anyone's to write who can write the namespace, credentials hash included (it proves no secret).
      const usable = (s: Secret | undefined) => {
        if (
          s === undefined ||
          s.metadata.labels?.[labels.managedBy] !== managedByValue ||
          s.metadata.labels?.[labels.databaseId] !== target.databaseId
        )
          return undefined;
        const id = s.metadata.labels?.[labels.connectionId];
        const connection = target.connections.find((c) => c.id === id);
        return connection === undefined || !owner.owns(obj, target, connection.id)
          ? undefined
          : credentialsFromSecret(s, connection.endpoints ?? target.endpoints);
      };
      let creds = usable(fromCache);
      let existing = fromCache;
      // A cached Secret naming another connection than status may lag behind a rotation: ask the live one.
      const stale =
        creds !== undefined && obj.status?.connection !== undefined && creds.connectionId !== obj.status.connection.id;
      if (creds === undefined || stale) {
        // The cache may lag: read the Secret itself before minting anything.
        existing = await deps.kube.get<Secret>(SecretType, ns, target.name);
        assertUsable(existing, target);
        creds = usable(existing);
      }
      if (creds !== undefined) {
        await write(existing, target, creds);
        await revokeNoted(owner, target, existing, creds.connectionId);
        await revokeReplaced(owner, target, creds.connectionId);
        return creds.connectionId;
      }
      // The connection whose password is lost: the one the Secret or status names. Another login of the database
      // named there is not a record of ours (someone else wrote it): skipped. One the database no longer lists (gone,
      // or never its) is kept as "previous" as before (it keys the mint); revocations check it at the service anyway.
      const named = [existing?.metadata.labels?.[labels.connectionId], obj.status?.connection?.id].filter(
        (id): id is string => id !== undefined,
      );
      const foreign = (id: string) => target.connections.some((c) => c.id === id) && !owner.owns(obj, target, id);
      for (const id of new Set(named.filter(foreign)))
        refused(id.slice(0, 80), target.databaseId, `Secret "${target.name}" or status.connection`);
      const previous = named.find((id) => !foreign(id));
      const retiring = obj.status?.rotation?.retiring?.id;
      const recovered = await owner.recover(obj, target, previous, retiring === undefined ? [] : [retiring]);
      await point("after-recover");
      const toRevoke = recovered.revoke.filter((id) => id !== recovered.credentials.connectionId);
      await write(existing, target, recovered.credentials, toRevoke);
      await point("before-revoke");
      deps.log.info({ connectionId: recovered.credentials.connectionId }, "Rebuilt connection Secret");
      deps.events.record(
        obj,
        "Normal",
        "SecretRebuilt",
        `Connection Secret "${target.name}" was ${existing === undefined ? "missing" : "edited or out of date"}; rebuilt it with working credentials`,
      );
      await revokeNoted(
        owner,
        target,
        await deps.kube.get<Secret>(SecretType, ns, target.name),
        recovered.credentials.connectionId,
      );
      return recovered.credentials.connectionId;
    },

    /**
     * Retain: the Secret outlives the resource (ownerReference removed, ids stay in its labels) so credentials are
     * never lost and a re-applied resource adopts both. Needs no API call: a missing credentials Secret must not
     * wedge deletion.
     */
    async release(name: string) {
      const secret = await deps.kube.get<Secret>(SecretType, ns, name);
      if (secret === undefined) return;
      const refs = secret.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === obj.metadata.uid)) return;
      await deps.kube.patch(SecretType, ns, name, {
        metadata: {
          resourceVersion: secret.metadata.resourceVersion,
          ownerReferences: refs.filter((r) => r.uid !== obj.metadata.uid),
        },
      });
      deps.events.record(obj, "Normal", "SecretRetained", `Kept connection Secret "${name}" (deletionPolicy Retain)`);
    },

    /** Delete: the Secret goes when it is ours: owned, or released earlier and holding one of `databaseIds`. */
    async delete(name: string, databaseIds: string[]) {
      const secret = await deps.kube.get<Secret>(SecretType, ns, name);
      if (secret === undefined || secret.metadata.labels?.[labels.managedBy] !== managedByValue) return;
      const owned = (secret.metadata.ownerReferences ?? []).some((r) => r.uid === obj.metadata.uid);
      // A released Secret (Retain earlier, then re-adopted) has no ownerReference yet: its database id says whose it is.
      const sameDb = databaseIds.includes(secret.metadata.labels?.[labels.databaseId] ?? "");
      if (!owned && !sameDb) return;
      try {
        await deps.kube.delete(
          SecretType,
          ns,
          name,
          secret.metadata.uid === undefined ? {} : { uid: secret.metadata.uid },
        );
      } catch (err) {
        if (!isKubeNotFound(err)) throw err;
      }
    },
  };
}
