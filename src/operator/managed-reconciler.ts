import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { isKubeNotFound } from "../kube/errors.ts";
import { SecretType, type KubeObject, type OwnerReference, type ResourceType, type Secret } from "../kube/types.ts";
import type { ConnectionSecret } from "../resources/common.ts";
import type { Condition, ConditionReason } from "../resources/conditions.ts";
import { finalizer } from "../resources/group.ts";
import { jsonEqual, setCondition } from "./conditions.ts";
import {
  annotations,
  buildSecret,
  credentialsFromSecret,
  labels,
  managedByValue,
  secretUpToDate,
  type ConnectionCredentials,
  type Endpoint,
} from "./connection-secret.ts";
import { ReconcileError, TerminalError, classifyError, messageOf } from "./errors.ts";
import type { EventRecorder } from "./events.ts";
import { done, failed, requeueAfter, type Outcome } from "./outcome.ts";

// The one generic loop (DESIGN "The loop"), shared by Project and Database:
//   get → paused? → deleting? (observe → delete per policy → release Secret → drop finalizer)
//       → ensure finalizer → observe → create if absent → update if drifted → publish Secret → status
// Per-kind code supplies only an ExternalClient; it returns data and throws typed errors. Only this loop logs,
// emits Events and writes status.

export const pausedAnnotation = "mds.dev/paused";

export interface ManagedStatus {
  id?: string | undefined;
  secretName?: string | undefined;
  observedGeneration?: number | undefined;
  conditions?: Condition[] | undefined;
  [key: string]: unknown;
}

export interface ManagedObject extends KubeObject {
  apiVersion: string;
  kind: string;
  spec: {
    deletionPolicy?: "Retain" | "Delete" | undefined;
    externalId?: string | undefined;
    connectionSecret?: ConnectionSecret | undefined;
  };
  status?: ManagedStatus | undefined;
}

export type SecretEndpoints = { direct: Endpoint; pooled?: Endpoint | undefined };

/** Where and for what the connection Secret is published. */
export interface SecretTarget {
  name: string;
  spec: ConnectionSecret | undefined;
  databaseId: string;
  projectId: string | undefined;
  /**
   * The remote database's connections: a Secret naming another one holds revoked credentials. Each one's endpoints
   * as the service reports them now: a Secret follows its own connection's hosts and ports when they move.
   */
  connections: { id: string; name: string; endpoints?: SecretEndpoints | undefined }[];
  /** The endpoints of the connection a new Secret is built from. */
  endpoints: SecretEndpoints;
}

export interface Observation {
  exists: boolean;
  /** Kind-specific status fields the loop merges in (never conditions). */
  status: Record<string, unknown>;
  ready: { ok: true } | { ok: false; reason: ConditionReason; message: string };
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

export type Deletion = { done: true } | { done: false; reason: ConditionReason; message: string };

/** The per-kind seam. Every call is idempotent; not found is data (`exists: false`, `done: true`), not an error. */
export interface ExternalClient<T extends ManagedObject> {
  observe(obj: T): Promise<Observation>;
  create(obj: T): Promise<Creation>;
  update(obj: T): Promise<void>;
  delete(obj: T): Promise<Deletion>;
  /**
   * Credentials for a Secret that is missing, edited or names a revoked connection: replay the creation response
   * when the service still can, else mint a new connection. `revoke` lists connections whose secrets were lost.
   */
  recoverCredentials(obj: T, target: SecretTarget, previousConnectionId: string | undefined): Promise<{ credentials: ConnectionCredentials; revoke: string[] }>;
  revokeConnection(id: string): Promise<void>;
  /** Status fields naming the connection in the Secret (Database: status.connection). */
  connectionStatus?(connectionId: string, target: SecretTarget): Record<string, unknown>;
}

export interface ManagedKind<T extends ManagedObject> {
  kind: string;
  type: ResourceType;
  /** Parses a raw object; throws TerminalError(InvalidSpec) with a message that says what to fix. */
  parse(raw: KubeObject): T;
  /** Builds the external client for this object: credentials, references. Throws ReconcileError. */
  connect(obj: T): Promise<ExternalClient<T>>;
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

/**
 * Only under deletionPolicy Delete does the Secret get an ownerReference (garbage collection as a backstop).
 * Under Retain it never has one: `kubectl delete --cascade=foreground` makes the garbage collector delete owned
 * objects before any finalizer could release them, and these credentials exist nowhere else.
 */
export function ownerReferenceOf(obj: ManagedObject): OwnerReference | undefined {
  if (obj.metadata.uid === undefined || (obj.spec.deletionPolicy ?? "Retain") !== "Delete") return undefined;
  return { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, uid: obj.metadata.uid, controller: true, blockOwnerDeletion: false };
}

export function secretNameOf(obj: ManagedObject): string {
  return obj.spec.connectionSecret?.name ?? obj.metadata.name;
}

function recordedId(obj: ManagedObject): string | undefined {
  return obj.spec.externalId ?? obj.status?.id ?? obj.metadata.annotations?.[annotations.externalId];
}

export async function reconcileManaged<T extends ManagedObject>(deps: LoopDeps, kind: ManagedKind<T>, key: string): Promise<Outcome> {
  const [namespace, name] = splitKey(key);
  const raw = deps.objects.get(namespace, name);
  if (raw === undefined) return done();
  const log = deps.logger.child({ namespace, name, generation: raw.metadata.generation });
  const now = deps.now ?? (() => new Date());
  let obj: T;
  try {
    obj = kind.parse(raw);
  } catch (err) {
    await reportError(deps, raw as T, kind, err, log, now);
    return failed(err);
  }
  const step = new LoopRun(deps, kind, obj, log, now);
  try {
    return await step.run();
  } catch (err) {
    const c = classifyError(err);
    if (c.conflict) {
      log.debug({ err }, "Conflict; requeued");
      return failed(err);
    }
    log.debug({ err }, `Could not reconcile ${kind.kind}`);
    await reportError(deps, step.obj, kind, err, log, now);
    return failed(err);
  }
}

async function reportError<T extends ManagedObject>(deps: LoopDeps, obj: T, kind: ManagedKind<T>, err: unknown, log: Logger, now: () => Date) {
  const c = classifyError(err);
  const message = messageOf(err);
  deps.events.record(obj, "Warning", c.reason, message);
  const generation = obj.metadata.generation;
  let conditions = setCondition(obj.status?.conditions, { type: "Synced", status: "False", reason: c.reason, message, observedGeneration: generation }, now());
  if (conditions.find((x) => x.type === "Ready") === undefined) {
    conditions = setCondition(conditions, { type: "Ready", status: "False", reason: c.reason, message, observedGeneration: generation }, now());
  }
  if (jsonEqual(conditions, obj.status?.conditions)) return;
  try {
    await deps.kube.patchStatus(kind.type, obj.metadata.namespace, obj.metadata.name, {
      metadata: { resourceVersion: obj.metadata.resourceVersion },
      status: { conditions, ...(c.terminal && generation !== undefined ? { observedGeneration: generation } : {}) },
    });
  } catch (writeErr) {
    log.debug({ err: writeErr }, "Could not write the error to status");
  }
}

export function splitKey(key: string): [string | undefined, string] {
  const i = key.indexOf("/");
  return i < 0 ? [undefined, key] : [key.slice(0, i) || undefined, key.slice(i + 1)];
}

class LoopRun<T extends ManagedObject> {
  readonly deps: LoopDeps;
  readonly kind: ManagedKind<T>;
  obj: T;
  readonly log: Logger;
  readonly now: () => Date;

  constructor(deps: LoopDeps, kind: ManagedKind<T>, obj: T, log: Logger, now: () => Date) {
    this.deps = deps;
    this.kind = kind;
    this.obj = obj;
    this.log = log;
    this.now = now;
  }

  get ns() {
    return this.obj.metadata.namespace;
  }

  async run(): Promise<Outcome> {
    const obj = this.obj;
    if (obj.metadata.deletionTimestamp !== undefined) return this.reconcileDeletion();
    if (obj.metadata.annotations?.[pausedAnnotation] === "true") {
      await this.writeStatus({}, { type: "Synced", status: "False", reason: "ReconcilePaused", message: "Reconciliation is paused by the mds.dev/paused annotation" });
      return done();
    }
    await this.ensureFinalizer();
    const external = await this.kind.connect(this.obj);
    let observed = await external.observe(this.obj);
    if (!observed.exists) {
      const id = recordedId(this.obj);
      if (id !== undefined && this.obj.spec.externalId === undefined) {
        // Recreating silently would hand the app an empty database under the old name.
        await this.writeStatus(
          {},
          { type: "Ready", status: "False", reason: "RemoteNotFound", message: `The remote object "${id}" no longer exists; delete this resource (and its status) to create a new one` },
          { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" },
        );
        return requeueAfter(this.deps.pollIntervals.slowMs);
      }
      if (this.obj.spec.externalId !== undefined) {
        throw new ReconcileError("RemoteNotFound", `cannot adopt ${this.kind.kind.toLowerCase()} "${this.obj.spec.externalId}": not found at the service`);
      }
      return this.create(external);
    }
    if (!observed.upToDate) {
      await external.update(this.obj);
      await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:after-update`);
      this.deps.events.record(this.obj, "Normal", "Updated", `Updated the remote ${this.kind.kind.toLowerCase()} to match the spec`);
      observed = await external.observe(this.obj);
    }
    let secretStatus: Record<string, unknown> = {};
    if (observed.secret !== undefined) {
      let connectionId: string;
      try {
        connectionId = await this.ensureSecret(external, observed.secret);
      } catch (err) {
        // Ready means "an app can connect with the Secret": not while it cannot be made current.
        if (!classifyError(err).conflict) {
          await this.writeStatus(observed.status, {
            type: "Ready",
            status: "False",
            reason: "SecretOutOfDate",
            message: `The connection Secret "${observed.secret.name}" is missing or out of date and could not be rebuilt yet: ${messageOf(err)}`,
          });
        }
        throw err;
      }
      secretStatus = { secretName: observed.secret.name, ...(external.connectionStatus?.(connectionId, observed.secret) ?? {}) };
    }
    const ready = observed.ready;
    await this.writeStatus(
      { ...observed.status, ...secretStatus },
      ready.ok
        ? { type: "Ready", status: "True", reason: "Available", message: "" }
        : { type: "Ready", status: "False", reason: ready.reason, message: ready.message },
      { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" },
    );
    const fast = Math.min(this.deps.pollIntervals.fastMs, observed.pollAfterMs ?? this.deps.pollIntervals.fastMs);
    return requeueAfter(observed.fastPoll ? fast : this.deps.pollIntervals.slowMs);
  }

  private async create(external: ExternalClient<T>): Promise<Outcome> {
    const creation = await external.create(this.obj);
    await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:after-create`);
    let secretStatus: Record<string, unknown> = {};
    if (creation.credentials !== undefined && creation.secret !== undefined) {
      // The creation response is the only copy of these credentials: the Secret goes first, retried in process.
      const connectionId = await this.publishWithRetry(creation.secret, creation.credentials);
      secretStatus = { secretName: creation.secret.name, ...(external.connectionStatus?.(connectionId, creation.secret) ?? {}) };
      await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:after-secret`);
    }
    this.obj = await this.deps.kube.patch<T>(this.kind.type, this.ns, this.obj.metadata.name, {
      metadata: { annotations: { [annotations.externalId]: creation.id } },
    });
    this.log.info({ id: creation.id, adopted: creation.adopted }, `${creation.adopted ? "Adopted" : "Created"} ${this.kind.kind}`);
    this.deps.events.record(
      this.obj,
      "Normal",
      creation.adopted ? "Adopted" : "Created",
      `${creation.adopted ? "Adopted the existing" : "Created the"} remote ${this.kind.kind.toLowerCase()} "${creation.id}"`,
    );
    await this.writeStatus(
      { ...creation.status, id: creation.id, ...secretStatus },
      { type: "Ready", status: "False", reason: "Creating", message: `Waiting for the remote ${this.kind.kind.toLowerCase()} "${creation.id}"` },
      { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" },
    );
    // The watch event of these writes brings the key back with a fresh object; an immediate requeue would read
    // the cache before it has them and repeat the lookup.
    return requeueAfter(this.deps.pollIntervals.fastMs);
  }

  private async publishWithRetry(target: SecretTarget, credentials: ConnectionCredentials): Promise<string> {
    let attempt = 0;
    for (;;) {
      try {
        const existing = await this.deps.kube.get<Secret>(SecretType, this.ns, target.name);
        this.assertSecretUsable(existing, target);
        await this.writeSecret(existing, target, credentials);
        return credentials.connectionId;
      } catch (err) {
        attempt++;
        if (attempt >= 5 || err instanceof ReconcileError) throw err;
        this.log.debug({ err, attempt }, "Could not write the connection Secret; retrying");
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
      }
    }
  }

  private assertSecretUsable(existing: Secret | undefined, target: SecretTarget) {
    if (existing === undefined) return;
    if (existing.metadata.labels?.[labels.managedBy] !== managedByValue) {
      throw new TerminalError(
        "InvalidSpec",
        `cannot write connection Secret "${target.name}": a Secret of that name exists and is not managed by mds-operator; delete it or set connectionSecret.name to another name`,
      );
    }
    const ownedByOther = (existing.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.uid !== this.obj.metadata.uid);
    const otherDb = existing.metadata.labels?.[labels.databaseId] !== target.databaseId;
    if (ownedByOther || otherDb) {
      throw new ReconcileError(
        "InvalidSpec",
        `cannot write connection Secret "${target.name}": it holds the credentials of ${otherDb ? `database "${existing.metadata.labels?.[labels.databaseId]}"` : "another resource"}; choose another connectionSecret.name`,
      );
    }
  }

  private async writeSecret(existing: Secret | undefined, target: SecretTarget, credentials: ConnectionCredentials): Promise<void> {
    const keep: Record<string, string> = {};
    const ledger = existing?.metadata.annotations?.[annotations.restores];
    if (ledger !== undefined) keep[annotations.restores] = ledger;
    const desired = buildSecret({
      namespace: this.ns ?? "default",
      name: target.name,
      credentials,
      spec: target.spec,
      projectId: target.projectId,
      databaseId: target.databaseId,
      owner: ownerReferenceOf(this.obj),
      ownerName: `${this.kind.kind}/${this.obj.metadata.name}`,
      keep,
    });
    if (existing === undefined) {
      await this.deps.kube.create(SecretType, desired);
      return;
    }
    if (secretUpToDate(existing, desired)) return;
    // Keep labels and annotations others added; ours win.
    desired.metadata.labels = { ...existing.metadata.labels, ...desired.metadata.labels };
    desired.metadata.annotations = { ...existing.metadata.annotations, ...desired.metadata.annotations };
    desired.metadata.resourceVersion = existing.metadata.resourceVersion ?? "";
    await this.deps.kube.replace(SecretType, desired);
  }

  /** Makes the Secret current; returns the connection id whose credentials it holds. */
  private async ensureSecret(external: ExternalClient<T>, target: SecretTarget): Promise<string> {
    const fromCache = this.deps.secrets.get(this.ns, target.name);
    // Kept credentials with the endpoints the service reports now for their connection: a moved host or port is
    // rewritten into the Secret without minting anything.
    const usable = (s: Secret | undefined) => {
      if (s === undefined || s.metadata.labels?.[labels.managedBy] !== managedByValue || s.metadata.labels?.[labels.databaseId] !== target.databaseId) return undefined;
      const connection = target.connections.find((c) => c.id === s.metadata.labels?.[labels.connectionId]);
      return connection === undefined ? undefined : credentialsFromSecret(s, connection.endpoints ?? target.endpoints);
    };
    let creds = usable(fromCache);
    let existing = fromCache;
    if (creds === undefined) {
      // The cache may lag: read the Secret itself before minting anything.
      existing = await this.deps.kube.get<Secret>(SecretType, this.ns, target.name);
      this.assertSecretUsable(existing, target);
      creds = usable(existing);
    }
    if (creds !== undefined) {
      await this.writeSecret(existing, target, creds);
      await this.revokeReplaced(external, target, creds.connectionId);
      return creds.connectionId;
    }
    const previous = existing?.metadata.labels?.[labels.connectionId] ?? (this.obj.status?.["connection"] as { id?: string } | undefined)?.id;
    const recovered = await external.recoverCredentials(this.obj, target, previous);
    await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:after-recover`);
    await this.writeSecret(existing, target, recovered.credentials);
    await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:before-revoke`);
    this.log.info({ connectionId: recovered.credentials.connectionId }, "Rebuilt connection Secret");
    this.deps.events.record(
      this.obj,
      "Normal",
      "SecretRebuilt",
      `Connection Secret "${target.name}" was ${existing === undefined ? "missing" : "edited or out of date"}; rebuilt it with working credentials`,
    );
    for (const id of recovered.revoke) {
      if (id === recovered.credentials.connectionId) continue;
      await this.revoke(external, id);
    }
    return recovered.credentials.connectionId;
  }

  private async revoke(external: ExternalClient<T>, id: string) {
    try {
      await external.revokeConnection(id);
      this.deps.events.record(this.obj, "Normal", "ConnectionRevoked", `Revoked connection "${id}" whose credentials were lost`);
    } catch (err) {
      this.log.warn({ err, connectionId: id }, "Could not revoke a lost connection");
    }
  }

  /**
   * A crash between a rebuilt Secret's write and the revocation leaves status naming the replaced connection, whose
   * password nobody holds any more: revoke it now. Only when the live Secret confirms it holds another connection
   * (a lagging cache must never get the published connection revoked). Steady state: no call.
   */
  private async revokeReplaced(external: ExternalClient<T>, target: SecretTarget, published: string) {
    const recorded = (this.obj.status?.["connection"] as { id?: string } | undefined)?.id;
    if (recorded === undefined || recorded === published || !target.connections.some((c) => c.id === recorded)) return;
    const live = await this.deps.kube.get<Secret>(SecretType, this.ns, target.name);
    if (live?.metadata.labels?.[labels.connectionId] !== published) return;
    await this.revoke(external, recorded);
  }

  private async ensureFinalizer() {
    const fins = this.obj.metadata.finalizers ?? [];
    if (fins.includes(finalizer)) return;
    this.obj = await this.deps.kube.patch<T>(this.kind.type, this.ns, this.obj.metadata.name, {
      metadata: { resourceVersion: this.obj.metadata.resourceVersion, finalizers: [...fins, finalizer] },
    });
  }

  private async reconcileDeletion(): Promise<Outcome> {
    const fins = this.obj.metadata.finalizers ?? [];
    if (!fins.includes(finalizer)) return done();
    const policy = this.obj.spec.deletionPolicy ?? "Retain";
    const secretName = this.obj.status?.secretName ?? (this.obj.spec.connectionSecret !== undefined ? secretNameOf(this.obj) : undefined);
    if (policy === "Delete") {
      const external = await this.kind.connect(this.obj);
      const result = await external.delete(this.obj);
      if (!result.done) {
        await this.writeStatus(
          {},
          { type: "Ready", status: "False", reason: result.reason, message: result.message },
          { type: "Synced", status: "True", reason: "ReconcileSuccess", message: "" },
        );
        return requeueAfter(this.deps.pollIntervals.fastMs * 2);
      }
      await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:after-delete`);
      if (secretName !== undefined) await this.deleteOwnSecret(secretName);
      this.deps.events.record(this.obj, "Normal", "Deleted", `Deleted the remote ${this.kind.kind.toLowerCase()}${recordedId(this.obj) ? ` "${recordedId(this.obj)}"` : ""}`);
    } else if (secretName !== undefined) {
      // Retain: the Secret outlives the resource (ownerReference removed, ids stay in its labels) so credentials
      // are never lost and a re-applied resource adopts both. Needs no API call: a missing credentials Secret
      // must not wedge deletion.
      await this.releaseSecret(secretName);
    }
    await this.deps.crashPoint(`${this.kind.kind.toLowerCase()}:before-finalizer-drop`);
    const current = this.obj.metadata.finalizers ?? [];
    await this.deps.kube.patch(this.kind.type, this.ns, this.obj.metadata.name, {
      metadata: { resourceVersion: this.obj.metadata.resourceVersion, finalizers: current.filter((f) => f !== finalizer) },
    });
    this.log.info({ policy }, `Finalized ${this.kind.kind}`);
    return done();
  }

  private async releaseSecret(name: string) {
    const secret = await this.deps.kube.get<Secret>(SecretType, this.ns, name);
    if (secret === undefined) return;
    const refs = secret.metadata.ownerReferences ?? [];
    if (!refs.some((r) => r.uid === this.obj.metadata.uid)) return;
    await this.deps.kube.patch(SecretType, this.ns, name, {
      metadata: { resourceVersion: secret.metadata.resourceVersion, ownerReferences: refs.filter((r) => r.uid !== this.obj.metadata.uid) },
    });
    this.deps.events.record(this.obj, "Normal", "SecretRetained", `Kept connection Secret "${name}" (deletionPolicy Retain)`);
  }

  private async deleteOwnSecret(name: string) {
    const secret = await this.deps.kube.get<Secret>(SecretType, this.ns, name);
    if (secret === undefined || secret.metadata.labels?.[labels.managedBy] !== managedByValue) return;
    const owned = (secret.metadata.ownerReferences ?? []).some((r) => r.uid === this.obj.metadata.uid);
    // A released Secret (Retain earlier, then re-adopted) has no ownerReference yet: its database id says whose it is.
    const status = this.obj.status as { id?: string; defaultDatabase?: { id?: string } } | undefined;
    const ours = [status?.id, status?.defaultDatabase?.id].filter((x): x is string => x !== undefined);
    const sameDb = ours.includes(secret.metadata.labels?.[labels.databaseId] ?? "");
    if (!owned && !sameDb) return;
    try {
      await this.deps.kube.delete(SecretType, this.ns, name, secret.metadata.uid === undefined ? {} : { uid: secret.metadata.uid });
    } catch (err) {
      if (!isKubeNotFound(err)) throw err;
    }
  }

  /** Writes status only when something other than nothing changed (no timestamp churn, no watch storms). */
  private async writeStatus(fields: Record<string, unknown>, ...conds: { type: "Ready" | "Synced"; status: "True" | "False"; reason: ConditionReason; message: string }[]) {
    const generation = this.obj.metadata.generation;
    let conditions = this.obj.status?.conditions;
    for (const c of conds) conditions = setCondition(conditions, { ...c, observedGeneration: generation }, this.now());
    const next: ManagedStatus = {
      ...(this.obj.status ?? {}),
      ...fields,
      ...(generation === undefined ? {} : { observedGeneration: generation }),
      ...(conditions === undefined ? {} : { conditions }),
    };
    for (const k of Object.keys(next)) if (next[k] === undefined) delete next[k];
    if (jsonEqual(next, this.obj.status ?? {})) return;
    const patched = await this.deps.kube.patchStatus<T>(this.kind.type, this.ns, this.obj.metadata.name, {
      metadata: { resourceVersion: this.obj.metadata.resourceVersion },
      status: next,
    });
    this.obj = patched;
  }
}
