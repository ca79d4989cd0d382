import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, Secret } from "../kube/types.ts";
import { jsonEqual } from "./conditions.ts";
import { credentialStatusOf, type SecretKeyRef } from "./credentials.ts";
import { annotations, type ConnectionSecretSpec } from "./connection-secret.ts";
import type { ExternalClient, Expiry, ManagedKind, ManagedObject, Observation } from "./managed-kind.ts";
import { ReconcileError, TerminalError, WaitingError, classifyError, messageOf } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { remoteIdOf } from "./identity.ts";
import { done, failed, requeueAfter, type Outcome } from "./outcome.ts";
import { connectionSecrets, publishedStatus, type SecretTarget } from "./secret-publisher.ts";
import { reportError, splitKey, synced, writeStatus, type ConditionUpdate } from "./status.ts";
import { pausedAnnotation, pollIntervalOf, reconcileRequestedAnnotation } from "./annotations.ts";

// The one generic loop (src/operator/RECONCILE.md, "The loop") for every kind with a remote object:
//   get → deleting? (observe → delete per policy → release Secret → drop finalizer) → paused?
//       → ensure finalizer → observe → create if absent → update if drifted → publish Secret → status
// With managementPolicy ObserveOnly it stops after observe: status and drift, no write to the service, no Secret.
// A kind supplies only a ManagedKind (parse, connect) whose ExternalClient returns data and throws typed errors.
// Only this loop logs, emits Events and writes status; the Secret is the connection-Secret component's.

export interface LoopDeps {
  kube: KubeClient;
  /** The object cache (informer) of the kind. */
  objects: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  /** The labelled Secret cache. */
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined };
  events: EventRecorder;
  logger: Logger;
  pollIntervals: { fastMs: number; slowMs: number };
  crashPoint: (name: string) => void | Promise<void>;
  /** Keeps the credentials Secret of a resolved token while this resource depends on it (credentials-guard.ts). */
  guardCredentials?: (ref: SecretKeyRef) => Promise<void>;
  now?: () => Date;
}

/** Milliseconds until the expiry's next moment (its warning, then the expiry itself); undefined: none ahead. */
function msUntilExpiry(expiry: Expiry | undefined, now: Date): number | undefined {
  const next = [expiry?.warnAt, expiry?.expiresAt].find((t) => t !== undefined && t > now);
  return next === undefined ? undefined : Math.max(0, next.getTime() - now.getTime()) + 100;
}

/** The outcome, requeued no later than the expiry's next moment. */
function wakeForExpiry(outcome: Outcome, expiry: Expiry | undefined, now: Date): Outcome {
  const wake = msUntilExpiry(expiry, now);
  if (wake === undefined || outcome.type === "error") return outcome;
  return outcome.type === "requeueAfter" && outcome.ms <= wake ? outcome : requeueAfter(wake);
}

export function secretNameOf(obj: {
  metadata: { name: string };
  spec: { connectionSecret?: ConnectionSecretSpec | undefined };
}): string {
  return obj.spec.connectionSecret?.name ?? obj.metadata.name;
}

export async function reconcileManaged<T extends ManagedObject>(
  deps: LoopDeps,
  kind: ManagedKind<T>,
  key: string,
): Promise<Outcome> {
  const [namespace, name] = splitKey(key);
  const raw = deps.objects.get(namespace, name);
  if (raw === undefined) return done();
  const log = deps.logger.child({ namespace, name, generation: raw.metadata.generation });
  const now = deps.now ?? (() => new Date());
  let run: LoopRun<T> | undefined;
  try {
    run = new LoopRun(deps, kind, kind.parse(raw), log, now);
    return await run.run();
  } catch (err) {
    await reportError(deps, kind.type, run?.obj ?? raw, err, log, now());
    return failed(err);
  }
}

class LoopRun<T extends ManagedObject> {
  obj: T;
  private readonly deps: LoopDeps;
  private readonly kind: ManagedKind<T>;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly finalizer: string;
  private readonly noun: string;
  /** Written with every status write of this reconcile. */
  private credentials: ReturnType<typeof credentialStatusOf> | undefined;
  private requested: string | undefined;
  /** Status of the resource's expiry, written with every status write of this reconcile. */
  private expiryStatus: { fields: Record<string, unknown>; conds: ConditionUpdate[] } | undefined;
  /** The Synced condition of a reconcile that got through: True, unless an annotation was invalid. */
  private synced: ConditionUpdate = synced;

  constructor(deps: LoopDeps, kind: ManagedKind<T>, obj: T, log: Logger, now: () => Date) {
    this.deps = deps;
    this.kind = kind;
    this.obj = obj;
    this.log = log;
    this.now = now;
    this.finalizer = `${kind.type.group}/finalizer`;
    this.noun = kind.kind.toLowerCase();
  }

  private get secrets() {
    return connectionSecrets({ ...this.deps, log: this.log }, this.obj);
  }

  private crashPoint(name: string) {
    return this.deps.crashPoint(`${this.noun}:${name}`);
  }

  async run(): Promise<Outcome> {
    if (this.obj.metadata.deletionTimestamp !== undefined) return this.reconcileDeletion();
    this.requested = this.obj.metadata.annotations?.[reconcileRequestedAnnotation];
    if (this.obj.metadata.annotations?.[pausedAnnotation] === "true") {
      await this.writeStatus(
        {},
        {
          type: "Synced",
          status: "False",
          reason: "ReconcilePaused",
          message: "Reconciliation is paused by the mds.dev/paused annotation",
        },
      );
      return done();
    }
    const expiry = this.kind.expiry?.(this.obj, this.now());
    if (expiry !== undefined && (await this.expire(expiry))) return done();
    try {
      return wakeForExpiry(await this.reconcileLive(), expiry, this.now());
    } catch (err) {
      // A Stalled resource is not retried by itself: it must still be looked at when it expires.
      const wake = msUntilExpiry(expiry, this.now());
      if (err instanceof TerminalError && wake !== undefined && wake < (err.recheckMs ?? Infinity))
        throw new TerminalError(err.reason, err.message, { cause: err.cause, recheckMs: wake });
      throw err;
    }
  }

  /**
   * Stores the expiry's fields, warns once before it, and at or after it deletes the resource (the deletion then
   * follows deletionPolicy); a protected resource is never deleted: condition Expired and a Warning Event say so.
   * True when the resource was deleted.
   */
  private async expire(expiry: Expiry): Promise<boolean> {
    const now = this.now();
    const at = expiry.expiresAt;
    const when = String(expiry.fields["expiresAt"]);
    if (at === undefined || now < at) {
      const warned = this.obj.status?.["expiryWarnedFor"];
      const due = at !== undefined && expiry.warnAt !== undefined && now >= expiry.warnAt && warned !== when;
      if (due) {
        const then =
          this.obj.spec.deletionProtection === true
            ? "; deletionProtection is true, so it will be kept"
            : ` and will then be deleted (deletionPolicy ${this.obj.spec.deletionPolicy ?? "Retain"})`;
        this.deps.events.record(this.obj, "Warning", "Expiring", `This ${this.noun} expires at ${when}${then}`);
      }
      const expired = this.obj.status?.conditions?.some((c) => c.type === "Expired" && c.status === "True");
      this.expiryStatus = {
        fields: { ...expiry.fields, expiryWarnedFor: due ? when : at === undefined ? undefined : warned },
        conds: expired
          ? [
              {
                type: "Expired",
                status: "False",
                reason: "NotExpired",
                message: at === undefined ? "" : `Expires at ${when}`,
              },
            ]
          : [],
      };
      return false;
    }
    if (this.obj.spec.deletionProtection === true) {
      const message = `Expired at ${when} but kept: spec.deletionProtection is true (set it to false to let it be deleted, or remove the expiry)`;
      this.deps.events.record(this.obj, "Warning", "ExpiryBlocked", message);
      this.expiryStatus = {
        fields: { ...expiry.fields, expiryWarnedFor: this.obj.status?.["expiryWarnedFor"] },
        conds: [{ type: "Expired", status: "True", reason: "DeletionProtected", message }],
      };
      return false;
    }
    this.deps.events.record(
      this.obj,
      "Normal",
      "Expired",
      `Expired at ${when}: deleting this ${this.noun} (deletionPolicy ${this.obj.spec.deletionPolicy ?? "Retain"})`,
    );
    this.log.info({ expiresAt: when }, `Deleting expired ${this.kind.kind}`);
    const uid = this.obj.metadata.uid;
    // Only this very object: one re-created under the same name is not deleted by mistake.
    await this.deps.kube.delete(
      this.kind.type,
      this.obj.metadata.namespace,
      this.obj.metadata.name,
      uid === undefined ? {} : { uid },
    );
    return true;
  }

  private async reconcileLive(): Promise<Outcome> {
    const slowMs = this.pollIntervalMs();
    if (this.observeOnly) return this.observeOnlyRun(slowMs);
    await this.ensureFinalizer();
    const external = await this.connect();
    if (external.withdrawn !== undefined) return this.withdraw(external, external.withdrawn);
    let observed = await external.observe(this.obj);
    if (!observed.exists) {
      const id = remoteIdOf(this.obj);
      if (this.obj.spec.externalId !== undefined) throw this.notVisible(this.obj.spec.externalId);
      if (id !== undefined) {
        // Recreating silently would hand the app an empty database under the old name.
        const message = `The remote object "${id}" no longer exists (as seen with credentials "${this.credentials?.secret}"); delete this resource (and its status) to create a new one`;
        await this.writeStatus({}, { type: "Ready", status: "False", reason: "RemoteNotFound", message }, this.synced);
        return requeueAfter(slowMs);
      }
      return this.create(external);
    }
    // Read-only so far: a second claimant is refused before it updates, mints or publishes anything.
    const manager = await this.kind.managerOtherThan?.(this.obj);
    if (manager !== undefined) throw this.adoptionConflict(manager);
    if (observed.drift.length > 0) {
      await external.update(this.obj);
      await this.crashPoint("after-update");
      this.deps.events.record(this.obj, "Normal", "Updated", `Updated the remote ${this.noun} to match the spec`);
      observed = await external.observe(this.obj);
    }
    const published =
      observed.secret === undefined
        ? undefined
        : await this.ensureSecret(external, observed.secret, observed.status, observed.ready.ok);
    const ready = observed.ready;
    await this.writeStatus(
      { ...observed.status, ...published?.fields },
      ready.ok
        ? { type: "Ready", status: "True", reason: "Available", message: "" }
        : { type: "Ready", status: "False", reason: ready.reason, message: ready.message },
      this.synced,
    );
    const poll = this.nextPoll(observed, slowMs);
    // A retiring connection's revocation or the next scheduled rotation may come before the next poll.
    return requeueAfter(Math.min(poll, published?.wakeInMs ?? poll));
  }

  private get observeOnly(): boolean {
    return this.obj.spec.managementPolicy === "ObserveOnly";
  }

  private nextPoll(observed: Observation, slowMs: number): number {
    const fast = Math.min(this.deps.pollIntervals.fastMs, observed.pollAfterMs ?? this.deps.pollIntervals.fastMs);
    return observed.fastPoll ? fast : slowMs;
  }

  private async connect(): Promise<ExternalClient<T>> {
    const external = await this.kind.connect(this.obj);
    const use = external.credentials;
    if (use === undefined) return external;
    this.credentials = credentialStatusOf(use);
    // The operator's own Secret is not the team's to delete; an ObserveOnly resource needs nothing to go away; a
    // Secret of another namespace (a Connection acting with its Database's) is never held by this one: another
    // team could otherwise keep it from being deleted.
    if (use.source !== "operator" && !this.observeOnly && use.ref.namespace === this.obj.metadata.namespace)
      await this.deps.guardCredentials?.(use.ref);
    return external;
  }

  /** Revokes and removes what a withdrawn grant let this resource hold; a new grant starts it afresh (a new mint). */
  private async withdraw(external: ExternalClient<T>, why: { reason: string; message: string }): Promise<Outcome> {
    if (remoteIdOf(this.obj) !== undefined || this.obj.status?.secretName !== undefined) {
      const result = await external.delete(this.obj);
      if (!result.done) throw new ReconcileError(result.reason, result.message);
      if (this.obj.status?.secretName !== undefined)
        await this.secrets.delete(this.obj.status.secretName, this.kind.secretDatabaseIds?.(this.obj) ?? []);
      this.obj = await this.deps.kube.patch<T>(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
        metadata: { annotations: { [annotations.externalId]: null } },
      });
      const gone = {
        id: undefined,
        connection: undefined,
        secretName: undefined,
        binding: undefined,
        rotation: undefined,
        endpoints: undefined,
      };
      await this.writeStatus(gone, { type: "Ready", status: "False", reason: why.reason, message: why.message });
      this.deps.events.record(
        this.obj,
        "Warning",
        why.reason,
        `Revoked the ${this.noun}'s credentials and deleted its Secret: ${why.message}`,
      );
    }
    throw new TerminalError(why.reason, why.message);
  }

  /** spec.externalId that the resource's token cannot see: nothing is written or minted until the user fixes it. */
  private notVisible(id: string): TerminalError {
    return new TerminalError(
      "AdoptionRefused",
      `cannot adopt ${this.noun} "${id}": not found with credentials "${this.credentials?.secret ?? "?"}" (it does not exist, or belongs to a workspace this token cannot see); fix spec.externalId or the credentials`,
      // A new token in the credentials Secret is no spec change: look again at the settled interval.
      { recheckMs: this.deps.pollIntervals.slowMs },
    );
  }

  /** Another resource manages the remote object: nothing is acted on until it lets go (its change wakes this one). */
  private adoptionConflict(manager: string): TerminalError {
    return new TerminalError(
      "AdoptionConflict",
      `${this.kind.kind} "${manager}" already manages the remote ${this.noun} "${remoteIdOf(this.obj)}"; this resource acts on nothing remote and deleting it deletes nothing remote. Delete this resource, or hand the ${this.noun} over: delete "${manager}" with deletionPolicy Retain or set its managementPolicy to ObserveOnly`,
    );
  }

  /** mds.dev/poll-interval; a bad value must not stop the rest (a Secret rebuild, a rotation): Synced=False says so. */
  private pollIntervalMs(): number {
    const { ms, problem } = pollIntervalOf(this.obj.metadata.annotations, this.deps.pollIntervals.slowMs);
    if (problem !== undefined)
      this.synced = { type: "Synced", status: "False", reason: "InvalidSpec", message: problem };
    return ms;
  }

  /**
   * ObserveOnly: mirror the remote object and report drift; never create, update, delete or mint, and no finalizer
   * (nothing remote is deleted, so nothing has to wait). Switching to Full adopts through the normal path.
   */
  private async observeOnlyRun(slowMs: number): Promise<Outcome> {
    const external = await this.connect();
    if (remoteIdOf(this.obj) === undefined) {
      throw new TerminalError(
        "InvalidSpec",
        `managementPolicy ObserveOnly needs spec.externalId: the remote ${this.noun} to observe`,
      );
    }
    const observed = await external.observe(this.obj);
    if (!observed.exists) {
      if (this.obj.spec.externalId !== undefined) throw this.notVisible(this.obj.spec.externalId);
      const message = `The remote object "${remoteIdOf(this.obj)}" no longer exists (as seen with credentials "${this.credentials?.secret}")`;
      await this.writeStatus(
        { drift: undefined },
        { type: "Ready", status: "False", reason: "RemoteNotFound", message },
        this.synced,
      );
      return requeueAfter(slowMs);
    }
    const drift = observed.drift.length === 0 ? undefined : observed.drift;
    if (drift !== undefined && !jsonEqual(drift, this.obj.status?.["drift"])) {
      const what = drift.map((d) => `${d.field}: spec "${d.desired}", remote "${d.actual}"`).join("; ");
      this.deps.events.record(
        this.obj,
        "Warning",
        "Drifted",
        `The remote ${this.noun} differs from the spec (ObserveOnly: not changed): ${what}`,
      );
    }
    // No Secret is written here, so a remote object without a usable connection is still available to observe.
    const ready =
      observed.ready.ok || observed.ready.reason !== "RemoteIncomplete" ? observed.ready : { ok: true as const };
    const message =
      "managementPolicy is ObserveOnly: the remote object is mirrored, never changed; no connection Secret is written";
    await this.writeStatus(
      { ...observed.status, drift },
      ready.ok
        ? { type: "Ready", status: "True", reason: "Available", message: "" }
        : { type: "Ready", status: "False", reason: ready.reason, message: ready.message },
      this.synced === synced ? { type: "Synced", status: "True", reason: "ObserveOnly", message } : this.synced,
    );
    return requeueAfter(this.nextPoll(observed, slowMs));
  }

  /** Makes the Secret current and rotates it when due; returns the status fields that name it. */
  private async ensureSecret(
    external: ExternalClient<T>,
    target: SecretTarget,
    observedStatus: Record<string, unknown>,
    ready: boolean,
  ) {
    const owner = external.connections;
    if (owner === undefined) return undefined;
    let published: string;
    try {
      published = await this.secrets.ensureCurrent(owner, target);
    } catch (err) {
      // Ready means "an app can connect with the Secret": not while it cannot be made current.
      if (!classifyError(err).conflict) {
        const message = `The connection Secret "${target.name}" is missing or out of date and could not be rebuilt yet: ${messageOf(err)}`;
        await this.writeStatus(observedStatus, { type: "Ready", status: "False", reason: "SecretOutOfDate", message });
      }
      throw err;
    }
    // Rotations wait for a ready database (a provisioning one may not have its logins yet). A failed rotation
    // leaves the current credentials working: Synced=False says why, Ready stays.
    if (!ready) return { fields: publishedStatus(target, published), wakeInMs: undefined };
    return this.secrets.rotate(owner, target, published, this.obj.spec.connectionSecret, (fields) =>
      this.writeStatus(fields),
    );
  }

  private async create(external: ExternalClient<T>): Promise<Outcome> {
    const creation = await external.create(this.obj);
    await this.crashPoint("after-create");
    let secretStatus: Record<string, unknown> = {};
    const owner = external.connections;
    if (owner !== undefined && creation.credentials !== undefined && creation.secret !== undefined) {
      secretStatus = publishedStatus(
        creation.secret,
        await this.secrets.publishCreated(creation.secret, creation.credentials),
      );
      await this.crashPoint("after-secret");
      // Only now: revoked before the write, a crash between the two would leave the Secret naming a revoked login.
      for (const id of creation.leaked ?? []) await owner.revoke(this.obj, creation.secret.databaseId, id);
    }
    this.obj = await this.deps.kube.patch<T>(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
      metadata: { annotations: { [annotations.externalId]: creation.id } },
    });
    const verb = creation.adopted ? "Adopted" : "Created";
    this.log.info({ id: creation.id, adopted: creation.adopted }, `${verb} ${this.kind.kind}`);
    this.deps.events.record(
      this.obj,
      "Normal",
      verb,
      `${creation.adopted ? "Adopted the existing" : "Created the"} remote ${this.noun} "${creation.id}"`,
    );
    await this.writeStatus(
      { ...creation.status, id: creation.id, ...secretStatus },
      {
        type: "Ready",
        status: "False",
        reason: "Creating",
        message: `Waiting for the remote ${this.noun} "${creation.id}"`,
      },
      this.synced,
    );
    // The watch event of these writes brings the key back with a fresh object; an immediate requeue would read
    // the cache before it has them and repeat the lookup.
    return requeueAfter(this.deps.pollIntervals.fastMs);
  }

  private async ensureFinalizer() {
    const fins = this.obj.metadata.finalizers ?? [];
    if (fins.includes(this.finalizer)) return;
    this.obj = await this.deps.kube.patch<T>(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
      metadata: { resourceVersion: this.obj.metadata.resourceVersion, finalizers: [...fins, this.finalizer] },
    });
  }

  private async reconcileDeletion(): Promise<Outcome> {
    const fins = this.obj.metadata.finalizers ?? [];
    if (!fins.includes(this.finalizer)) return done();
    const policy = this.obj.spec.deletionPolicy ?? "Retain";
    const secretName =
      this.obj.status?.secretName ??
      (this.obj.spec.connectionSecret !== undefined ? secretNameOf(this.obj) : undefined);
    const spared = policy === "Delete" ? await this.sparedFromDeletion() : undefined;
    if (spared !== undefined) {
      this.deps.events.record(
        this.obj,
        "Normal",
        "Retained",
        `Kept the remote ${this.noun} despite deletionPolicy Delete: ${spared}`,
      );
    }
    if (policy === "Delete" && spared === undefined) {
      const external = await this.connect().catch((err: unknown) => {
        if (!(err instanceof ReconcileError) || err.reason !== "CredentialsMissing") throw err;
        // Deleting the remote object needs the token. Say how to finish without it.
        throw new WaitingError(
          "CredentialsMissing",
          `${err.message}. To finish deleting: restore that Secret, or keep the remote ${this.noun} with ` +
            `kubectl patch ${this.kind.type.plural}.${this.kind.type.group} ${this.obj.metadata.name} -n ${this.obj.metadata.namespace ?? "default"} --type=merge -p '{"spec":{"deletionPolicy":"Retain"}}'`,
        );
      });
      const result = await external.delete(this.obj);
      if (!result.done) {
        await this.writeStatus(
          {},
          { type: "Ready", status: "False", reason: result.reason, message: result.message },
          this.synced,
        );
        return requeueAfter(this.deps.pollIntervals.fastMs * 2);
      }
      await this.crashPoint("after-delete");
      if (secretName !== undefined)
        await this.secrets.delete(secretName, this.kind.secretDatabaseIds?.(this.obj) ?? []);
      const id = remoteIdOf(this.obj);
      this.deps.events.record(this.obj, "Normal", "Deleted", `Deleted the remote ${this.noun}${id ? ` "${id}"` : ""}`);
    } else if (secretName !== undefined) {
      await this.secrets.release(secretName);
    }
    await this.crashPoint("before-finalizer-drop");
    await this.deps.kube.patch(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
      metadata: {
        resourceVersion: this.obj.metadata.resourceVersion,
        finalizers: fins.filter((f) => f !== this.finalizer),
      },
    });
    this.log.info({ policy }, `Finalized ${this.kind.kind}`);
    return done();
  }

  /** Why deletionPolicy Delete must not delete the remote object: it was only observed, never adopted, or is another's. */
  private async sparedFromDeletion(): Promise<string | undefined> {
    if (this.observeOnly) return "managementPolicy is ObserveOnly";
    const externalId = this.obj.spec.externalId;
    if (externalId !== undefined && this.obj.status?.id !== externalId)
      return `the adoption of "${externalId}" was never accepted`;
    const manager = await this.kind.managerOtherThan?.(this.obj);
    if (manager !== undefined) return `${this.kind.kind} "${manager}" manages it`;
    return undefined;
  }

  private async writeStatus(fields: Record<string, unknown>, ...conds: ConditionUpdate[]) {
    const always = {
      ...this.expiryStatus?.fields,
      ...(this.credentials === undefined ? {} : { credentials: this.credentials }),
      ...(this.requested === undefined ? {} : { lastHandledReconcileAt: this.requested }),
      // Drift is ObserveOnly's report: in Full the loop corrects it.
      ...(this.observeOnly ? {} : { drift: undefined }),
    };
    const all = [...(this.expiryStatus?.conds ?? []), ...conds];
    this.obj = await writeStatus(this.deps.kube, this.kind.type, this.obj, { ...always, ...fields }, all, this.now());
  }
}
