import { isKubeNotFound } from "../../kube/errors.ts";
import { SecretType, type OwnerReference, type Secret } from "../../kube/types.ts";
import { ReconcileError, TerminalError } from "../errors.ts";
import { retryInProcess } from "../outcome.ts";
import type { ConnectionCredentials } from "./connection-credentials.ts";
import { annotations, buildSecret, credentialsFromSecret, labels, managedByValue, secretUpToDate } from "./render.ts";
import { consumerGate } from "./consumer-gate.ts";
import { revocations } from "./revocation.ts";
import { rotateStep, rotationPolicyOf } from "./rotation.ts";
import type { ConnectionSecretSpec } from "./spec.ts";
import type { ConnectionCalls, PublisherDeps, SecretOwner, SecretTarget } from "./types.ts";

// The publisher: when and in which order the owner's Secret is written. Publish the credentials of a creation, keep
// the Secret current (rebuild a missing or edited one, recover lost credentials, revoke the connections whose
// password nobody holds), rotate it, release it (Retain) or delete it (Delete). The write order is what makes every
// crash safe: README.md#write-order-and-why, and docs/design.md#the-secrets-write-order. Used by the managed loop for every kind whose resources own a Secret; the
// calls at the service come from the kind (ConnectionCalls, built with connectionCalls() in recovery.ts).

/** The status fields that name the published Secret and connection (status.binding: servicebinding.io). */
export function publishedStatus(target: SecretTarget, connectionId: string): Record<string, unknown> {
  const name = target.connections.find((c) => c.id === connectionId)?.name ?? "";
  return { secretName: target.name, binding: { name: target.name }, connection: { id: connectionId, name } };
}

/**
 * Only under deletionPolicy Delete does the Secret get an ownerReference (garbage collection as a backstop).
 * Under Retain it never has one: `kubectl delete --cascade=foreground` makes the garbage collector delete owned
 * objects before any finalizer could release them, and these credentials exist nowhere else.
 */
function ownerReferenceOf(obj: SecretOwner): OwnerReference | undefined {
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

/**
 * The Secret operations for one owner. One closure, longer than 80 lines, because its small functions share the
 * owner, its namespace, the crash points and the revocations; each of them is short.
 */
// eslint-disable-next-line max-lines-per-function -- closure factory: its short functions share the owner, namespace, crash points and revocations
export function connectionSecrets<T extends SecretOwner>(deps: PublisherDeps, obj: T) {
  const ns = obj.metadata.namespace;
  const point = (name: string) => deps.crashPoint(`${obj.kind.toLowerCase()}:${name}`);
  const { refused, revoke, revokeReplaced, revokeNoted, retire } = revocations(deps, obj);

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
      calls: ConnectionCalls<T>,
      target: SecretTarget,
      published: string,
      spec: ConnectionSecretSpec | undefined,
      saveStatus: (fields: Record<string, unknown>) => Promise<void>,
    ) {
      const rotated = await rotateStep({
        obj,
        calls,
        target,
        published,
        policy: rotationPolicyOf(spec),
        now: Date.now(),
        publish: (credentials) => publishOnly(target, credentials).then(() => undefined),
        // Only one of the owner's own: the label is anyone's to write who can write the Secret.
        liveConnectionId: async () => {
          const id = (await deps.kube.get<Secret>(SecretType, ns, target.name))?.metadata.labels?.[labels.connectionId];
          return id !== undefined && calls.owns(obj, target, id) ? id : undefined;
        },
        revoke: (id, why) => revoke(calls, target, id, why, "a rotation's record"),
        retire: (id) => retire(calls, target, id),
        saveStatus,
        crashPoint: point,
        record: (reason, message, type = "Normal") => deps.events.record(obj, type, reason, message),
        consumers:
          deps.consumers === undefined
            ? undefined
            : consumerGate({
                kube: deps.kube,
                index: deps.consumers,
                namespace: ns ?? "default",
                secretName: target.name,
              }),
        sessionsRecheckMs: deps.pollIntervals?.fastMs,
      });
      return {
        fields: { ...publishedStatus(target, rotated.connectionId), rotation: rotated.rotation },
        wakeInMs: rotated.wakeInMs,
      };
    },

    /** Makes the Secret current; returns the connection id whose credentials it holds. */
    async ensureCurrent(calls: ConnectionCalls<T>, target: SecretTarget): Promise<string> {
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
        return connection === undefined || !calls.owns(obj, target, connection.id)
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
        await revokeNoted(calls, target, existing, creds.connectionId);
        await revokeReplaced(calls, target, creds.connectionId);
        return creds.connectionId;
      }
      // The connection whose password is lost: the one the Secret or status names. Another login of the database
      // named there is not a record of ours (someone else wrote it): skipped. One the database no longer lists (gone,
      // or never its) is kept as "previous" as before (it keys the mint); revocations check it at the service anyway.
      const named = [existing?.metadata.labels?.[labels.connectionId], obj.status?.connection?.id].filter(
        (id): id is string => id !== undefined,
      );
      const foreign = (id: string) => target.connections.some((c) => c.id === id) && !calls.owns(obj, target, id);
      for (const id of new Set(named.filter(foreign)))
        refused(id.slice(0, 80), target.databaseId, `Secret "${target.name}" or status.connection`);
      const previous = named.find((id) => !foreign(id));
      const retiring = obj.status?.rotation?.retiring?.id;
      const recovered = await calls.recover(obj, target, previous, retiring === undefined ? [] : [retiring]);
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
        calls,
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
