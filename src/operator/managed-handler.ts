import type { KubeObject, ResourceType } from "../kube/types.ts";
import type { Condition } from "./conditions.ts";
import type { ConnectionCredentials } from "./secret/connection-credentials.ts";
import type { ConnectionSecretSpec } from "./secret/spec.ts";
import type { CredentialUse } from "./credentials.ts";
import type { ConnectionCalls, SecretTarget } from "./secret/types.ts";

// The seam between the managed loop (managed-reconciler.ts) and a kind: what a kind's object looks like to the loop,
// and the data its external client returns. A kind's code imports these types; only the loop acts on them.

export interface ManagedObject extends KubeObject {
  apiVersion: string;
  kind: string;
  spec: {
    deletionPolicy?: "Retain" | "Delete" | undefined;
    deletionProtection?: boolean | undefined;
    managementPolicy?: "Full" | "ObserveOnly" | undefined;
    externalId?: string | undefined;
    connectionSecret?: ConnectionSecretSpec | undefined;
  };
  status?:
    | {
        id?: string | undefined;
        secretName?: string | undefined;
        connection?: { id: string } | undefined;
        observedGeneration?: number | undefined;
        conditions?: Condition[] | undefined;
        [key: string]: unknown;
      }
    | undefined;
}

export interface Observation {
  exists: boolean;
  /** Kind-specific status fields the loop merges in (never conditions). */
  status: Record<string, unknown>;
  ready: { ok: true } | { ok: false; reason: string; message: string };
  /** Where the remote object differs from the spec in what `update` can change (empty: up to date). */
  drift: DriftItem[];
  /** Poll fast (provisioning, recovering) instead of at the slow resync interval. */
  fastPoll: boolean;
  /** When polling fast: how soon (default the fast interval); young objects are polled sooner. */
  pollAfterMs?: number | undefined;
  secret?: SecretTarget | undefined;
}

interface DriftItem {
  field: string;
  desired: string;
  actual: string;
}

export interface Creation {
  id: string;
  adopted: boolean;
  status: Record<string, unknown>;
  /** Present only when the creation response carried them: the loop writes the Secret before anything else. */
  credentials?: ConnectionCredentials | undefined;
  secret?: SecretTarget | undefined;
  /** Connections of this resource's name nobody holds (a mint whose answer was lost): revoked once the Secret is written. */
  leaked?: string[] | undefined;
}

/**
 * When a resource expires (a kind with spec.expireAfter or the like): the loop deletes the resource then, unless
 * spec.deletionProtection holds it (then condition Expired says so), after a Warning Event at `warnAt`.
 */
export interface Expiry {
  /** Status fields to keep (computed once: an operator restart or clock skew must not move the time). */
  fields: Record<string, unknown>;
  /** Absent: the spec no longer sets an expiry (the fields clear what was stored). */
  expiresAt?: Date | undefined;
  warnAt?: Date | undefined;
}

export type Deletion = { done: true } | { done: false; reason: string; message: string };

/** The per-kind seam. Every call is idempotent; not found is data (`exists: false`, `done: true`), not an error. */
export interface ExternalClient<T extends ManagedObject> {
  observe(obj: T): Promise<Observation>;
  create(obj: T): Promise<Creation>;
  update(obj: T): Promise<void>;
  delete(obj: T): Promise<Deletion>;
  /** A kind that publishes credentials: how they are recovered and revoked. */
  connections?: ConnectionCalls<T> | undefined;
  /** The token this client acts with (status.credentials). */
  credentials?: CredentialUse | undefined;
  /**
   * The grant this resource acted under was withdrawn (a Connection whose Database no longer allows its namespace):
   * the loop revokes what it holds (`delete`), deletes its Secret, forgets the remote id, then reports this refusal.
   */
  withdrawn?: { reason: string; message: string } | undefined;
}

export interface ManagedHandler<T extends ManagedObject> {
  kind: string;
  type: ResourceType;
  /** Parses a raw object; throws TerminalError(InvalidSpec) with a message that says what to fix. */
  parse(raw: KubeObject): T;
  /** Builds the external client for this object: credentials, references. Throws ReconcileError. */
  connect(obj: T): Promise<ExternalClient<T>>;
  /** The database ids whose Secret this resource publishes (deletionPolicy Delete removes a released one too). */
  secretDatabaseIds?(obj: T): string[];
  /**
   * Another resource ("namespace/name") that manages this one's remote object (src/resources/remote/adoption.ts): then
   * this one acts on nothing remote, and its deletionPolicy Delete deletes nothing.
   */
  managerOtherThan?(obj: T): Promise<string | undefined>;
  /** The resource's expiry, if its spec sets one; throws TerminalError(InvalidSpec) for one that cannot be read. */
  expiry?(obj: T, now: Date): Expiry | undefined;
}
