import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ResourceType, Secret } from "../kube/types.ts";
import type { Condition } from "./conditions.ts";
import { annotations, type ConnectionCredentials, type ConnectionSecretSpec } from "./connection-secret.ts";
import { ReconcileError, classifyError, messageOf } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { remoteIdOf } from "./identity.ts";
import { done, failed, requeueAfter, type Outcome } from "./outcome.ts";
import { connectionSecrets, publishedStatus, type ConnectionOwner, type SecretTarget } from "./secret-publisher.ts";
import { reportError, splitKey, synced, writeStatus, type ConditionUpdate } from "./status.ts";

// The one generic loop (DESIGN "The loop") for every kind with a remote object:
//   get → paused? → deleting? (observe → delete per policy → release Secret → drop finalizer)
//       → ensure finalizer → observe → create if absent → update if drifted → publish Secret → status
// A kind supplies only a ManagedKind (parse, connect) whose ExternalClient returns data and throws typed errors.
// Only this loop logs, emits Events and writes status; the Secret is the connection-Secret component's.

export const pausedAnnotation = "mds.dev/paused";

export interface ManagedObject extends KubeObject {
  apiVersion: string;
  kind: string;
  spec: {
    deletionPolicy?: "Retain" | "Delete" | undefined;
    externalId?: string | undefined;
    connectionSecret?: ConnectionSecretSpec | undefined;
  };
  status?:
    | { id?: string | undefined; secretName?: string | undefined; connection?: { id: string } | undefined; observedGeneration?: number | undefined; conditions?: Condition[] | undefined; [key: string]: unknown }
    | undefined;
}

export interface Observation {
  exists: boolean;
  /** Kind-specific status fields the loop merges in (never conditions). */
  status: Record<string, unknown>;
  ready: { ok: true } | { ok: false; reason: string; message: string };
  upToDate: boolean;
  /** Poll fast (provisioning, recovering) instead of at the slow resync interval. */
  fastPoll: boolean;
  /** When polling fast: how soon (default the fast interval); young objects are polled sooner. */
  pollAfterMs?: number | undefined;
  secret?: SecretTarget | undefined;
}

export interface Creation {
  id: string;
  adopted: boolean;
  status: Record<string, unknown>;
  /** Present only when the creation response carried them: the loop writes the Secret before anything else. */
  credentials?: ConnectionCredentials | undefined;
  secret?: SecretTarget | undefined;
}

export type Deletion = { done: true } | { done: false; reason: string; message: string };

/** The per-kind seam. Every call is idempotent; not found is data (`exists: false`, `done: true`), not an error. */
export interface ExternalClient<T extends ManagedObject> {
  observe(obj: T): Promise<Observation>;
  create(obj: T): Promise<Creation>;
  update(obj: T): Promise<void>;
  delete(obj: T): Promise<Deletion>;
  /** A kind that publishes credentials: how they are recovered and revoked. */
  connections?: ConnectionOwner<T> | undefined;
}

export interface ManagedKind<T extends ManagedObject> {
  kind: string;
  type: ResourceType;
  /** Parses a raw object; throws TerminalError(InvalidSpec) with a message that says what to fix. */
  parse(raw: KubeObject): T;
  /** Builds the external client for this object: credentials, references. Throws ReconcileError. */
  connect(obj: T): Promise<ExternalClient<T>>;
  /** The database ids whose Secret this resource publishes (deletionPolicy Delete removes a released one too). */
  secretDatabaseIds?(obj: T): string[];
}

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
  now?: () => Date;
}

export function secretNameOf(obj: { metadata: { name: string }; spec: { connectionSecret?: ConnectionSecretSpec | undefined } }): string {
  return obj.spec.connectionSecret?.name ?? obj.metadata.name;
}

export async function reconcileManaged<T extends ManagedObject>(deps: LoopDeps, kind: ManagedKind<T>, key: string): Promise<Outcome> {
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
    if (this.obj.metadata.annotations?.[pausedAnnotation] === "true") {
      await this.writeStatus({}, { type: "Synced", status: "False", reason: "ReconcilePaused", message: "Reconciliation is paused by the mds.dev/paused annotation" });
      return done();
    }
    await this.ensureFinalizer();
    const external = await this.kind.connect(this.obj);
    let observed = await external.observe(this.obj);
    if (!observed.exists) {
      const id = remoteIdOf(this.obj);
      if (id !== undefined && this.obj.spec.externalId === undefined) {
        // Recreating silently would hand the app an empty database under the old name.
        const message = `The remote object "${id}" no longer exists; delete this resource (and its status) to create a new one`;
        await this.writeStatus({}, { type: "Ready", status: "False", reason: "RemoteNotFound", message }, synced);
        return requeueAfter(this.deps.pollIntervals.slowMs);
      }
      if (this.obj.spec.externalId !== undefined) {
        throw new ReconcileError("RemoteNotFound", `cannot adopt ${this.noun} "${this.obj.spec.externalId}": not found at the service`);
      }
      return this.create(external);
    }
    if (!observed.upToDate) {
      await external.update(this.obj);
      await this.crashPoint("after-update");
      this.deps.events.record(this.obj, "Normal", "Updated", `Updated the remote ${this.noun} to match the spec`);
      observed = await external.observe(this.obj);
    }
    const published = observed.secret === undefined ? undefined : await this.ensureSecret(external, observed.secret, observed.status, observed.ready.ok);
    const ready = observed.ready;
    await this.writeStatus(
      { ...observed.status, ...published?.fields },
      ready.ok ? { type: "Ready", status: "True", reason: "Available", message: "" } : { type: "Ready", status: "False", reason: ready.reason, message: ready.message },
      synced,
    );
    const fast = Math.min(this.deps.pollIntervals.fastMs, observed.pollAfterMs ?? this.deps.pollIntervals.fastMs);
    const poll = observed.fastPoll ? fast : this.deps.pollIntervals.slowMs;
    // A retiring connection's revocation or the next scheduled rotation may come before the next poll.
    return requeueAfter(Math.min(poll, published?.wakeInMs ?? poll));
  }

  /** Makes the Secret current and rotates it when due; returns the status fields that name it. */
  private async ensureSecret(external: ExternalClient<T>, target: SecretTarget, observedStatus: Record<string, unknown>, ready: boolean) {
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
    return this.secrets.rotate(owner, target, published, this.obj.spec.connectionSecret, (fields) => this.writeStatus(fields));
  }

  private async create(external: ExternalClient<T>): Promise<Outcome> {
    const creation = await external.create(this.obj);
    await this.crashPoint("after-create");
    let secretStatus: Record<string, unknown> = {};
    const owner = external.connections;
    if (owner !== undefined && creation.credentials !== undefined && creation.secret !== undefined) {
      secretStatus = publishedStatus(creation.secret, await this.secrets.publishCreated(creation.secret, creation.credentials));
      await this.crashPoint("after-secret");
    }
    this.obj = await this.deps.kube.patch<T>(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
      metadata: { annotations: { [annotations.externalId]: creation.id } },
    });
    const verb = creation.adopted ? "Adopted" : "Created";
    this.log.info({ id: creation.id, adopted: creation.adopted }, `${verb} ${this.kind.kind}`);
    this.deps.events.record(this.obj, "Normal", verb, `${creation.adopted ? "Adopted the existing" : "Created the"} remote ${this.noun} "${creation.id}"`);
    await this.writeStatus(
      { ...creation.status, id: creation.id, ...secretStatus },
      { type: "Ready", status: "False", reason: "Creating", message: `Waiting for the remote ${this.noun} "${creation.id}"` },
      synced,
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
    const secretName = this.obj.status?.secretName ?? (this.obj.spec.connectionSecret !== undefined ? secretNameOf(this.obj) : undefined);
    if (policy === "Delete") {
      const external = await this.kind.connect(this.obj);
      const result = await external.delete(this.obj);
      if (!result.done) {
        await this.writeStatus({}, { type: "Ready", status: "False", reason: result.reason, message: result.message }, synced);
        return requeueAfter(this.deps.pollIntervals.fastMs * 2);
      }
      await this.crashPoint("after-delete");
      if (secretName !== undefined) await this.secrets.delete(secretName, this.kind.secretDatabaseIds?.(this.obj) ?? []);
      const id = remoteIdOf(this.obj);
      this.deps.events.record(this.obj, "Normal", "Deleted", `Deleted the remote ${this.noun}${id ? ` "${id}"` : ""}`);
    } else if (secretName !== undefined) {
      await this.secrets.release(secretName);
    }
    await this.crashPoint("before-finalizer-drop");
    await this.deps.kube.patch(this.kind.type, this.obj.metadata.namespace, this.obj.metadata.name, {
      metadata: { resourceVersion: this.obj.metadata.resourceVersion, finalizers: fins.filter((f) => f !== this.finalizer) },
    });
    this.log.info({ policy }, `Finalized ${this.kind.kind}`);
    return done();
  }

  private async writeStatus(fields: Record<string, unknown>, ...conds: ConditionUpdate[]) {
    this.obj = await writeStatus(this.deps.kube, this.kind.type, this.obj, fields, conds, this.now());
  }
}
