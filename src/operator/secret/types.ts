import type { Logger } from "pino";
import type { KubeClient } from "../../kube/client.ts";
import type { KubeObject, Secret } from "../../kube/types.ts";
import type { EventRecorder } from "../events.ts";
import type { ConnectionCredentials, Endpoint } from "./connection-credentials.ts";
import type { ConsumerIndex } from "./consumer-index.ts";
import type { ConnectionSecretSpec, RotationStatus } from "./spec.ts";

// The types the component's files share (kept apart so that publisher.ts, rotation.ts and recovery.ts import them
// without importing each other).

type SecretEndpoints = { direct: Endpoint; pooled?: Endpoint | undefined };

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
  /** The connection the server made together with the database (recovery.ts, originalConnectionOf). */
  originalConnectionId?: string | undefined;
  /** The endpoints of the connection a new Secret is built from. */
  endpoints: SecretEndpoints;
}

/**
 * What a revocation did: `revoked`; `absent` (not a connection of the database: gone already, or never its own);
 * `refused` (a connection of the database this resource did not mint: nothing was called).
 */
export type RevokeResult = "revoked" | "absent" | "refused";

/**
 * A kind's calls on its connections at the service: what the publisher needs to recover lost credentials, mint a
 * rotation's and revoke what was lost. Built with connectionCalls() (recovery.ts) from the kind's RecoveryPlan.
 */
export interface ConnectionCalls<T> {
  /**
   * Whether `id` is one of this owner's own connections on the target database (its names, or the original
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
  /**
   * How many client sessions use the login of connection `id` now; undefined where the API cannot tell (the public
   * API), 0 for a connection that is gone. Ask only about an own connection (`owns`): the number is shown in status.
   */
  openSessions(obj: T, id: string): Promise<number | undefined>;
}

/**
 * The owner: the resource (a Project, Database or Connection) whose Secret it is, as far as the component needs it.
 * It is the Secret's mds.dev/owner annotation, and its ownerReference under deletionPolicy Delete.
 */
export interface SecretOwner extends KubeObject {
  apiVersion: string;
  kind: string;
  spec: { deletionPolicy?: "Retain" | "Delete" | undefined };
  /** status.connection: the connection the Secret was last published with (written by publishedStatus). */
  status?:
    | { connection?: { id: string } | undefined; rotation?: RotationStatus | undefined; [key: string]: unknown }
    | undefined;
}

/** What the component needs of the operator: the Kubernetes client, the Secret cache, events, logs, crash points. */
export interface PublisherDeps {
  kube: KubeClient;
  /** The labelled Secret cache. */
  secrets: { get(namespace: string | undefined, name: string): Secret | undefined };
  events: EventRecorder;
  log: Logger;
  crashPoint: (name: string) => void | Promise<void>;
  /** Who uses which Secret, when the operator follows consumers (--rotation-consumers); else undefined. */
  consumers?: ConsumerIndex | undefined;
  /** The operator's poll intervals: the fast one is the shortest wait between two reads of a login's sessions. */
  pollIntervals?: { fastMs: number } | undefined;
}
