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

/** The health Argo CD gives an object with a reason (deploy/argocd's scripts; test/deploy/docs.test.ts runs them). */
type ArgoHealth = "Healthy" | "Progressing" | "Degraded" | "Suspended" | "(see Ready)";

/**
 * A condition reason as the user meets it: the condition it appears in, Argo CD's health, what it means and what
 * to do. docs/conditions.md and the reasons table of docs/troubleshooting.md are rendered from these
 * (`npm run docs:reference`).
 */
export interface ReasonDoc {
  condition: string;
  argo: ArgoHealth;
  means: string;
  fix: string;
}

/**
 * The reasons the loops themselves write, whatever the kind. Reasons of the service's model that several kinds
 * write are src/resources/conditions.ts's; a kind's own are in its module (`reasons`).
 */
export const loopReasons = {
  Available: {
    condition: "Ready=True",
    argo: "Healthy",
    means: "The remote object is ready and its connection Secret, if it has one, is current.",
    fix: "Nothing.",
  },
  Creating: {
    condition: "Ready=False",
    argo: "Progressing",
    means: "The operator is looking the object up by logicalId and creating it.",
    fix: "Wait. If it lasts, look at `Synced`.",
  },
  Deleting: {
    condition: "Ready=False",
    argo: "Progressing",
    means: "The resource is being deleted per its `deletionPolicy`.",
    fix: "Wait; if stuck, see `WaitingForDatabases` and `CredentialsMissing`.",
  },
  RemoteNotFound: {
    condition: "Ready=False",
    argo: "Degraded",
    means:
      "The remote object in `status.id` was deleted outside Kubernetes; the operator does not silently create a new one.",
    fix: "Delete the resource (with `Retain` nothing remote is touched) and apply it again.",
  },
  SecretOutOfDate: {
    condition: "Ready=False",
    argo: "Progressing",
    means: "The connection Secret is missing or was edited; the operator is rebuilding it with working credentials.",
    fix: "Wait; do not edit operator-owned Secrets (use `connectionSecret.template` for extra keys).",
  },
  AwaitingOperator: {
    condition: "Reconciling=True",
    argo: "Progressing",
    means: "No operator has reconciled the resource yet: the CRDs' default status.",
    fix: "Check that the operator runs, leads (`/readyz`) and watches this namespace (`--namespaces`).",
  },
  Progressing: {
    condition: "Reconciling=True",
    argo: "Progressing",
    means: "The operator has started on the resource; Ready and Synced are not written yet.",
    fix: "Wait.",
  },
  Rotating: {
    condition: "Reconciling=True",
    argo: "Progressing",
    means:
      "A credentials rotation is minting new credentials (`status.rotation.pending`); the current ones keep working.",
    fix: "Wait; if it lasts, look at `Synced`.",
  },
  ConsumersNotRolled: {
    condition: "Reconciling=True",
    argo: "Progressing",
    means:
      "A rotation keeps the replaced credentials past `rotation.consumerTimeout`: workloads or pods that use the Secret have not moved, or clients still hold sessions of the old login (`status.rotation.retiring.waitingFor` names them); alert `MdsRotationConsumersNotRolled`.",
    fix: '`kubectl rollout status` on each named workload and fix what holds it, or end the named sessions; or `kubectl annotate <kind>/<name> mds.dev/rotate-force="$(date +%s)" --overwrite` to revoke anyway ([credentials.md](credentials.md#rotation-that-follows-its-consumers)).',
  },
  ReconcileSuccess: {
    condition: "Synced=True",
    argo: "(see Ready)",
    means: "The last reconcile succeeded.",
    fix: "Nothing.",
  },
  ReconcileError: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "The last reconcile failed; the message names the cause; retried with backoff (1 s doubling to 5 min).",
    fix: "Read the message; the operator's logs at `MDS_LOG_LEVEL=debug` have the details.",
  },
  ReconcilePaused: {
    condition: "Synced=False",
    argo: "Suspended",
    means: 'The `mds.dev/paused: "true"` annotation stops reconciliation.',
    fix: "`kubectl annotate mdsdb orders mds.dev/paused-` to resume.",
  },
  ObserveOnly: {
    condition: "Synced=True",
    argo: "(see Ready)",
    means:
      "`spec.managementPolicy: ObserveOnly`: the operator mirrors the remote object, reports differences in `status.drift` (and a `Drifted` Event), and changes nothing; no Secret, no finalizer.",
    fix: "Nothing; set `managementPolicy: Full` to take the object over (it is adopted).",
  },
  AdoptionRefused: {
    condition: "Synced=False, Stalled=True",
    argo: "Degraded",
    means:
      "`spec.externalId` names an object the resource's credentials cannot see, or (for a resource with a parent reference) one of another parent. Nothing was written or minted.",
    fix: "Fix `spec.externalId`, `spec.credentials` or `spec.projectRef`.",
  },
  AdoptionConflict: {
    condition: "Synced=False, Stalled=True",
    argo: "Degraded",
    means:
      "Another resource of the same kind (named in the message) already manages this remote object: one remote object, one managing resource. This one updates, mints and deletes nothing remote; deleting it only drops its finalizer.",
    fix: "Delete this resource; or, to move management here, delete the other one with `deletionPolicy: Retain` (or set it `ObserveOnly`).",
  },
  InvalidSpec: {
    condition: "Synced=False",
    argo: "Degraded",
    means:
      "The spec cannot be acted on (unknown region, a reference to itself, …). Not retried until the spec changes.",
    fix: "Fix the spec as the message says; immutable fields need a new resource.",
  },
  CredentialsMissing: {
    condition: "Synced=False",
    argo: "Progressing",
    means:
      "No token for the resource: `spec.credentials.secretRef`, else the namespace's own Secret `mds-credentials` (key `token`), else the operator's (`mds-system/mds-credentials`) only in namespaces `--credentials-fallback-namespaces` allows (default: `mds-system` only). The message names the Secret to create. While deleting a `Delete`-policy resource: its credentials Secret is gone.",
    fix: "Create it: `kubectl -n <namespace> create secret generic mds-credentials --from-literal=token=…`; the operator notices. A stuck deletion: restore the Secret, or patch `deletionPolicy` to `Retain` (the message gives the command). See [many-teams.md](many-teams.md).",
  },
  CredentialsInvalid: {
    condition: "Synced=False",
    argo: "Degraded",
    means: "The service refused the token (401/403).",
    fix: "Replace the token in the credentials Secret.",
  },
  ApiUnavailable: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "The service is unreachable or answered 5xx; backoff, then convergence when it is back.",
    fix: "Check `MDS_API_URL`, the service, and the operator's NetworkPolicy egress (below).",
  },
  RateLimited: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "The service answered 429; every caller of that token waits for `Retry-After`.",
    fix: "Nothing, unless it persists: fewer resources per token, or a higher limit at the service.",
  },
  Conflict: {
    condition: "Synced=False",
    argo: "Degraded",
    means: "The service refused the request as a conflict (409), e.g. a name already used.",
    fix: "Read the message; change the conflicting field or adopt the existing object with `externalId`.",
  },
  RemoteIncomplete: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "The service's answer lacks what the operator needs (e.g. a connection without any connection string).",
    fix: "Read the message; it is the service's answer that must change.",
  },
  RemoteUnreadable: {
    condition: "Synced=False",
    argo: "Progressing",
    means:
      "The service's answer about this object has a shape the operator cannot read, or a lookup met an unreadable item. Other resources are unaffected.",
    fix: "Read the message (it names the fields); check `mds_client_unreadable_items_total` and the operator's log.",
  },
  DeletionProtected: {
    condition: "Expired=True",
    argo: "Healthy",
    means: "The resource is past `status.expiresAt` but `spec.deletionProtection` is true, so it is kept.",
    fix: "Set `deletionProtection: false` to let it be deleted, or remove the expiry.",
  },
  NotExpired: {
    condition: "Expired=False",
    argo: "Healthy",
    means: "The expiry is ahead again: the spec changed after it had expired.",
    fix: "Nothing.",
  },
} as const satisfies Record<string, ReasonDoc>;
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
