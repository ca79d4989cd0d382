import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, Secret } from "../kube/types.ts";
import { credentialStatusOf, type SecretKeyRef } from "./credentials.ts";
import type { ConnectionSecretSpec } from "./secret/spec.ts";
import { TerminalError } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { remoteIdOf } from "./identity.ts";
import type { ExternalClient, ManagedHandler, ManagedObject, Observation } from "./managed-handler.ts";
import { requeueAfter, type Outcome } from "./outcome.ts";
import { connectionSecrets } from "./secret/publisher.ts";
import { synced, writeStatus, type ConditionUpdate } from "./status.ts";
import { pollIntervalOf } from "./annotations.ts";
import type { AcceptedIds } from "./accepted.ts";
import type { ConsumerIndex } from "./secret/consumer-index.ts";

// One reconcile of one object by the managed loop (managed-reconciler.ts): the object as last written, what this
// reconcile learnt (credentials, the requested reconcile, an invalid annotation) and the steps every path shares.
// The paths themselves (full, ObserveOnly, deletion) are functions over it in managed-reconciler.ts and
// managed-deletion.ts.

export interface LoopDeps {
  kube: KubeClient;
  /** The reasons that stall this kind (progress.ts). */
  stalling: ReadonlySet<string>;
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
  /** Where the loop records the remote id it accepted for an object (accepted.ts): what other kinds may act on. */
  accepted?: AcceptedIds | undefined;
  /** Who uses which Secret, when the operator follows a rotation's consumers (--rotation-consumers). */
  consumers?: ConsumerIndex | undefined;
  now?: () => Date;
}

export function secretNameOf(obj: {
  metadata: { name: string };
  spec: { connectionSecret?: ConnectionSecretSpec | undefined };
}): string {
  return obj.spec.connectionSecret?.name ?? obj.metadata.name;
}

export class LoopRun<T extends ManagedObject> {
  /** The object as last written by this reconcile. */
  obj: T;
  readonly finalizer: string;
  /** The kind in lower case, for messages ("the remote database"). */
  readonly noun: string;
  /** Written with every status write of this reconcile. */
  credentials: ReturnType<typeof credentialStatusOf> | undefined;
  requested: string | undefined;
  /** The Synced condition of a reconcile that got through: True, unless an annotation was invalid. */
  synced: ConditionUpdate = synced;
  /** The resource's expiry (managed-expiry.ts), written with every status write of this reconcile. */
  expiryStatus: { fields: Record<string, unknown>; conds: ConditionUpdate[] } | undefined;
  /** The Secret component for `obj`: built again only when the object it reads was written. */
  private published: { obj: T; secrets: ReturnType<typeof connectionSecrets<T>> } | undefined;

  readonly deps: LoopDeps;
  readonly handler: ManagedHandler<T>;
  readonly log: Logger;
  readonly now: () => Date;

  constructor(deps: LoopDeps, handler: ManagedHandler<T>, obj: T, log: Logger, now: () => Date) {
    this.deps = deps;
    this.handler = handler;
    this.log = log;
    this.now = now;
    this.obj = obj;
    this.finalizer = `${handler.type.group}/finalizer`;
    this.noun = handler.kind.toLowerCase();
  }

  get secrets() {
    if (this.published?.obj !== this.obj)
      this.published = { obj: this.obj, secrets: connectionSecrets({ ...this.deps, log: this.log }, this.obj) };
    return this.published.secrets;
  }

  get observeOnly(): boolean {
    return this.obj.spec.managementPolicy === "ObserveOnly";
  }

  crashPoint(name: string) {
    return this.deps.crashPoint(`${this.noun}:${name}`);
  }

  /** Merges a JSON merge patch into the object (annotations, finalizers) and keeps what the server answered. */
  async patch(patch: Record<string, unknown>) {
    this.obj = await this.deps.kube.patch<T>(
      this.handler.type,
      this.obj.metadata.namespace,
      this.obj.metadata.name,
      patch,
    );
  }

  nextPoll(observed: Observation, slowMs: number): number {
    const fast = Math.min(this.deps.pollIntervals.fastMs, observed.pollAfterMs ?? this.deps.pollIntervals.fastMs);
    return observed.fastPoll ? fast : slowMs;
  }

  /** mds.dev/poll-interval; a bad value must not stop the rest (a Secret rebuild, a rotation): Synced=False says so. */
  pollIntervalMs(): number {
    const { ms, problem } = pollIntervalOf(this.obj.metadata.annotations, this.deps.pollIntervals.slowMs);
    if (problem !== undefined)
      this.synced = { type: "Synced", status: "False", reason: "InvalidSpec", message: problem };
    return ms;
  }

  async connect(): Promise<ExternalClient<T>> {
    const external = await this.handler.connect(this.obj);
    const use = external.credentials;
    if (use === undefined) return external;
    this.credentials = credentialStatusOf(use);
    // The operator's own Secret is not the team's to delete; an ObserveOnly resource needs nothing to go away; a
    // Secret of another namespace (a resource acting with another's credentials) is never held by this one: another
    // team could otherwise keep it from being deleted.
    if (use.source !== "operator" && !this.observeOnly && use.ref.namespace === this.obj.metadata.namespace)
      await this.deps.guardCredentials?.(use.ref);
    return external;
  }

  /**
   * The remote object recorded for this resource is not there (both management policies): an adoption its token
   * cannot see is refused; one that existed is reported gone and never recreated silently (that would hand the app
   * an empty database under the old name).
   */
  async notFound(slowMs: number): Promise<Outcome> {
    this.unaccept();
    if (this.obj.spec.externalId !== undefined) throw this.notVisible(this.obj.spec.externalId);
    const seen = `The remote object "${remoteIdOf(this.obj)}" no longer exists (as seen with credentials "${this.credentials?.secret}")`;
    const message = this.observeOnly ? seen : `${seen}; delete this resource (and its status) to create a new one`;
    const ready = { type: "Ready", status: "False", reason: "RemoteNotFound", message } as const;
    await this.writeStatus({ drift: undefined }, ready, this.synced);
    return requeueAfter(slowMs);
  }

  /** spec.externalId that the resource's token cannot see: nothing is written or minted until the user fixes it. */
  notVisible(id: string): TerminalError {
    return new TerminalError(
      "AdoptionRefused",
      `cannot adopt ${this.noun} "${id}": not found with credentials "${this.credentials?.secret ?? "?"}" (it does not exist, or belongs to a workspace this token cannot see); fix spec.externalId or the credentials`,
      // A new token in the credentials Secret is no spec change: look again at the settled interval.
      { recheckMs: this.deps.pollIntervals.slowMs },
    );
  }

  /** Another resource manages the remote object: nothing is acted on until it lets go (its change wakes this one). */
  adoptionConflict(manager: string): TerminalError {
    return new TerminalError(
      "AdoptionConflict",
      `${this.handler.kind} "${manager}" already manages the remote ${this.noun} "${remoteIdOf(this.obj)}"; this resource acts on nothing remote and deleting it deletes nothing remote. Delete this resource, or hand the ${this.noun} over: delete "${manager}" with deletionPolicy Retain or set its managementPolicy to ObserveOnly`,
    );
  }

  /** This reconcile accepted the remote id its status now records (accepted.ts): others may act through it. */
  accept(): void {
    const id = this.obj.status?.id;
    if (typeof id === "string") this.deps.accepted?.accept(this.handler.kind, this.obj, id);
  }

  /** Nothing may act through this resource: refused, gone remotely, or being deleted. */
  unaccept(): void {
    this.deps.accepted?.forget(this.handler.kind, this.obj);
  }

  async writeStatus(fields: Record<string, unknown>, ...conds: ConditionUpdate[]) {
    const always = {
      ...this.expiryStatus?.fields,
      ...(this.credentials === undefined ? {} : { credentials: this.credentials }),
      ...(this.requested === undefined ? {} : { lastHandledReconcileAt: this.requested }),
      // Drift is ObserveOnly's report: in Full the loop corrects it.
      ...(this.observeOnly ? {} : { drift: undefined }),
    };
    const all = [...(this.expiryStatus?.conds ?? []), ...conds];
    this.obj = await writeStatus(this.deps, this.handler.type, this.obj, { ...always, ...fields }, all, this.now());
  }
}
