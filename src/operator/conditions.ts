// Conditions as metav1.Condition, so `kubectl wait --for=condition=Ready`, Argo CD and Flux understand them. Ready
// says whether the object is usable; Synced whether the last reconcile succeeded (crossplane's model); Reconciling
// and Stalled are kstatus's abnormal-true pair (progress.ts derives both): working toward the spec, or stopped until
// the user changes something. The CRD schema of a condition is in src/resources/conditions.ts; these are the loop's
// own types.
import { isoSeconds } from "./time.ts";

export type ConditionType = "Ready" | "Synced" | "Reconciling" | "Stalled" | "Expired";

export interface Condition {
  /** One of ours, or one a newer version wrote: kept as it is (src/operator/lenient.ts). */
  type: ConditionType | (string & {});
  status: "True" | "False" | "Unknown";
  observedGeneration?: number | undefined;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/**
 * The reasons the loops themselves write, with what the user should understand and do. A kind adds its own
 * (src/resources/conditions.ts joins both into the closed set the docs and the Argo CD health checks are built from).
 */
export const loopReasons = {
  // Ready
  Available: "The remote object is ready and its connection Secret is current.",
  Creating: "The operator is creating the remote object (lookup by logicalId, then create).",
  Deleting: "The resource is being deleted; the remote object is deleted or retained per deletionPolicy.",
  RemoteNotFound:
    "The remote object recorded in status.id no longer exists; the operator does not recreate it silently.",
  SecretOutOfDate:
    "The connection Secret is missing or was edited; the operator is rebuilding it with working credentials.",
  // Reconciling
  AwaitingOperator:
    "No operator has reconciled the resource yet (the CRD's default status). If it stays, check that the operator runs, leads and watches this namespace.",
  Progressing: "The operator has started on the resource; Ready and Synced say what it is doing.",
  Rotating:
    "The operator is rotating the connection Secret's credentials (status.rotation.pending); the current ones keep working.",
  ConsumersNotRolled:
    "A rotation's replaced credentials are kept past rotation.consumerTimeout: workloads or pods that use the Secret have not moved to the new ones, or clients still hold sessions of the old login (status.rotation.retiring.waitingFor names them). Fix the rollout (or end those sessions), or set a new value of mds.dev/rotate-force to revoke them anyway.",
  // Synced
  ReconcileSuccess: "The last reconcile completed without error.",
  ReconcileError: "The last reconcile failed; the message names the cause and the operator retries with backoff.",
  ReconcilePaused: "Reconciliation is paused by the mds.dev/paused annotation.",
  ObserveOnly:
    "managementPolicy is ObserveOnly: the operator mirrors the remote object and reports drift, and changes nothing.",
  AdoptionRefused:
    "spec.externalId names an object the resource's credentials cannot see (or, for a resource with a parent reference, one of another parent); nothing was changed or minted. Fix spec.externalId, spec.credentials or the reference.",
  AdoptionConflict:
    "Another resource of the same kind already manages this remote object (the message names it); this one updates, mints and deletes nothing remote, and deleting it deletes nothing remote. Delete it, or let the other one go (delete it with deletionPolicy Retain, or make it ObserveOnly).",
  InvalidSpec: "The spec cannot be acted on (for example an unknown region or a reference to itself); fix the spec.",
  CredentialsMissing:
    "No credentials Secret for the resource (spec.credentials.secretRef, the namespace's mds-credentials, or the operator's where allowed), or it lacks the key.",
  CredentialsInvalid: "The service refused the API token (401 or 403); replace the token in the credentials Secret.",
  ApiUnavailable: "The service cannot be reached or answered 5xx; the operator retries with backoff.",
  RateLimited: "The service answered 429; the operator waits for Retry-After before calling it again.",
  Conflict: "The service refused the request as a conflict (409); the message says with what.",
  RemoteIncomplete:
    "The service's answer lacks something the operator needs (a connection string, an endpoint); the message names it.",
  RemoteUnreadable:
    "The service's answer about this object does not have a shape the operator can read; the message names the fields.",
} as const;
export type LoopReason = keyof typeof loopReasons;

/**
 * The reasons after which the operator gets no further without a person (a spec edit, a new token, a look at the
 * service): a Ready or Synced False with one of them sets Stalled=True, so kstatus reads Failed and Argo CD Degraded.
 * These are the loops' own; a kind adds its own (`stallingReasons` of its controller), and the Argo CD health script
 * names them all (src/resources/index.ts `stallingReasons()`; test/deploy/argocd-health.test.ts checks that).
 */
export const loopStallingReasons = [
  "InvalidSpec",
  "AdoptionRefused",
  "AdoptionConflict",
  "CredentialsInvalid",
  "Conflict",
  "RemoteNotFound",
] as const;

interface ConditionInput {
  type: ConditionType;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  observedGeneration?: number | undefined;
}

/**
 * meta.SetStatusCondition: replace the condition of the same type, keeping lastTransitionTime unless the status
 * changed, so a reconcile that learns nothing new writes nothing new.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: Date,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const existing = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastTransitionTime:
      existing !== undefined && existing.status === input.status ? existing.lastTransitionTime : isoSeconds(now),
    ...(input.observedGeneration === undefined ? {} : { observedGeneration: input.observedGeneration }),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

/** Deep equality over JSON values, key order ignored: the "status changed?" test. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => jsonEqual(ao[k], bo[k]));
}
