import { createHash } from "node:crypto";
import type { KubeObject } from "../kube/types.ts";
import { externalIdAnnotation } from "./annotations.ts";
import { TerminalError } from "./errors.ts";

/**
 * The caller-chosen key every create carries: stable across operator restarts and cluster rebuilds (instanceId is
 * a setting, not the cluster's uid), so a re-created resource finds its remote object instead of duplicating it.
 */
export function logicalIdOf(instanceId: string, namespace: string, name: string): string {
  const id = `k8s:${instanceId}:${namespace}/${name}`;
  if (id.length <= 128) return id;
  return `k8s:${instanceId.slice(0, 40)}:${createHash("sha256").update(id).digest("hex").slice(0, 64)}`;
}

/** Idempotency-Key for a POST: derived, so a retry after a crash sends the same one. */
export function idempotencyKeyOf(...parts: string[]): string {
  return `mds-${createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 48)}`;
}

/**
 * Idempotency-Key of a POST made for one Kubernetes object (docs/design.md#keys-name-the-incarnation): its uid names
 * the incarnation, so the object's own retries after a crash or a lost answer send the same key (no duplicate), and a
 * new object of the same name never gets a deleted one's answer replayed.
 */
export function incarnationKeyOf(obj: { metadata: { uid?: string | undefined } }, ...parts: string[]): string {
  const uid = obj.metadata.uid;
  // Every object an API server returns has one; without it the key could name a deleted object's create.
  if (uid === undefined || uid === "") throw new Error("an object without metadata.uid has no Idempotency-Key");
  return idempotencyKeyOf(...parts, uid);
}

/**
 * The name of the connections the operator mints for one resource. Unique per installation, kind and resource:
 * a connection of this name whose password nobody holds is revoked (a mint whose answer was lost), so no other
 * resource, nor another cluster adopting the same database, may share it.
 */
export function connectionNameOf(instanceId: string, kind: string, namespace: string, name: string): string {
  // "." between namespace and name: a namespace cannot contain one, so ("team", "a-db") and ("team-a", "db") differ.
  const n = `k8s-${instanceId}-${kind.toLowerCase()}-${namespace}.${name}`;
  return n.length <= 64 ? n : `k8s-${createHash("sha256").update(n).digest("hex").slice(0, 40)}`;
}

/**
 * Whether `name` is `base` or one of its rotations' names (`<base cut to fit>-r<time>`, secret/recovery.ts): the
 * names a resource mints under, so the only connections (besides the original one of a database it created) it may
 * ever revoke.
 */
export function isNameOf(name: string, base: string): boolean {
  if (name === base) return true;
  const m = /^(.*)(-r[0-9a-z]+)$/.exec(name);
  return m !== null && m[1] === base.slice(0, 64 - m[2]!.length);
}

/**
 * The remote id a resource is bound to: `spec.externalId` (adoption), else `status.id`, else the annotation the loop
 * writes right after a create (status may not be written yet when a crash follows). Every kind with a remote object.
 */
export function remoteIdOf(obj: KubeObject | undefined): string | undefined {
  if (obj === undefined) return undefined;
  const spec = obj["spec"] as { externalId?: string } | undefined;
  const status = obj["status"] as { id?: string } | undefined;
  return spec?.externalId ?? status?.id ?? obj.metadata.annotations?.[externalIdAnnotation];
}

/** The refusal of an id (the annotation's, or status.id) that names an object this resource did not create. */
export function notCreatedHere(kind: string, id: string): TerminalError {
  return new TerminalError(
    "AdoptionRefused",
    `status.id or the annotation ${externalIdAnnotation} names ${kind} "${id}", which this resource did not create (it does not carry this resource's logicalId) and does not adopt; nothing is done with it. Remove both, or adopt it with spec.externalId`,
  );
}

/**
 * The remote id other resources may act on through this one (a Connection minting, a restore, a project's
 * databases): status.id, which the loop writes once it accepted the object (for a `spec.externalId`, when they are
 * equal). Neither an unaccepted externalId nor the id annotation alone counts: otherwise any namespace could name
 * another team's id and borrow a grant or token to act on it.
 */
export function boundIdOf(obj: KubeObject | undefined): string | undefined {
  const externalId = (obj?.["spec"] as { externalId?: string } | undefined)?.externalId;
  const id = (obj?.["status"] as { id?: string } | undefined)?.id;
  // status.id only: the id annotation alone is not proven (each kind proves it by its logicalId before acting on it).
  return externalId === undefined || id === externalId ? id : undefined;
}
