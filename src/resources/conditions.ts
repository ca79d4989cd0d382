import { z } from "zod";
import { loopReasons, type LoopReason } from "../operator/conditions.ts";

// Conditions follow metav1.Condition so `kubectl wait --for=condition=Ready`, Argo CD and Flux understand them.
// Ready says whether the remote object is usable and its Secret is current; Synced whether the last reconcile
// succeeded (crossplane's model); Reconciling and Stalled are kstatus's (Flux, kpt, Config Sync): Reconciling is True
// while the operator works toward the spec (creating, provisioning, waiting for a project or credentials, rotating,
// restoring, deleting), Stalled while an error holds that only a change by the user can fix: a spec edit, a
// credentials Secret, a reconcile request (Argo CD shows it Degraded). src/operator/progress.ts derives both.
export const ConditionType = z.enum(["Ready", "Synced", "Reconciling", "Stalled", "Expired"]);
export type ConditionType = z.infer<typeof ConditionType>;

export const ConditionStatus = z.enum(["True", "False", "Unknown"]);
export type ConditionStatus = z.infer<typeof ConditionStatus>;

// The closed set of reasons the operator writes: the loops' own (src/operator/conditions.ts) and the kinds'. The CRD accepts any CamelCase reason (as metav1.Condition does),
// so an older CRD never rejects a newer operator's status; TypeScript keeps the operator itself to this list.
// Each entry's text is what the user should understand and do; the README's troubleshooting table is built from it.
export const conditionReasons = {
  // Ready
  Available: loopReasons.Available,
  Creating: loopReasons.Creating,
  Provisioning: "The service is provisioning the database; the operator polls it fast until it is ready.",
  Restoring: "A restore is replacing the database's data; it becomes Available again when the restore ends.",
  BackingUp: "A DatabaseBackup's backup was requested; the operator follows it until it completes or fails.",
  Scheduled: "A BackupSchedule is active: it creates a DatabaseBackup at each slot and keeps the newest `keep`.",
  Suspended: "A BackupSchedule with spec.suspend: it takes no new backups (retention still runs).",
  Deleting: loopReasons.Deleting,
  RemoteFailure: "The service reports the database in status failure; see the message and the service's logs.",
  RemoteNotFound: loopReasons.RemoteNotFound,
  SecretOutOfDate: loopReasons.SecretOutOfDate,
  WaitingForDatabases: "Deletion of a Project with deletionPolicy Delete waits until its databases are gone.",
  DeletionBlocked:
    "Deletion of a Project with deletionPolicy Delete waits: a Database with deletionProtection manages one of its databases (its default database would go with it); the message names it.",
  WaitingForProject:
    "The database is its project's default database, which the public API deletes only with its project; delete the Project.",
  // Reconciling (besides the Ready and Synced reasons of what is in progress; False: Available, ReconcilePaused or the Stalled reason)
  AwaitingOperator: loopReasons.AwaitingOperator,
  Progressing: loopReasons.Progressing,
  Rotating: loopReasons.Rotating,
  ConsumersNotRolled: loopReasons.ConsumersNotRolled,
  // Synced
  ReconcileSuccess: loopReasons.ReconcileSuccess,
  ReconcileError: loopReasons.ReconcileError,
  ReconcilePaused: loopReasons.ReconcilePaused,
  InvalidSpec: loopReasons.InvalidSpec,
  CredentialsMissing: loopReasons.CredentialsMissing,
  CredentialsInvalid: loopReasons.CredentialsInvalid,
  ProjectNotReady: "The Database's project is missing or not ready yet; the operator waits for it.",
  DatabaseNotReady: "A database this resource refers to is missing or not ready yet; the operator waits for it.",
  DatabaseNotAccepted:
    "The Database this resource refers to names a remote id in its status that its own reconcile has not accepted: it neither created that database nor adopted it (spec.externalId) under its own token without a conflict. Nothing is done through it until it has. Right after an operator start, until that Database's first reconcile, the wait is silent (no condition, no Event).",
  SourceNotReady:
    "A clone's source database is missing, has no remote id yet or is not ready; nothing is created until it is, and the operator retries.",
  NoProductionBranch:
    "A Database on a preview branch (spec.branch) waits until its project has a branch: the service makes a project's first branch its production branch, which can never be deleted. Create the production branch first (a Database with spec.branch role production).",
  BranchRoleMismatch:
    "The branch spec.branch names is (or would be created as) a production branch where the spec says preview, or the reverse; fix spec.branch.",
  ApiUnavailable: loopReasons.ApiUnavailable,
  RateLimited: loopReasons.RateLimited,
  Conflict: loopReasons.Conflict,
  RemoteIncomplete: loopReasons.RemoteIncomplete,
  RemoteUnreadable: loopReasons.RemoteUnreadable,
  // The loop's text, with what it means for the kinds that have a parent reference.
  AdoptionRefused:
    "spec.externalId names an object the resource's credentials cannot see, or (a Database) one of another project; nothing was changed or minted. Fix spec.externalId, spec.credentials or spec.projectRef.",
  AdoptionConflict: loopReasons.AdoptionConflict,
  ObserveOnly: loopReasons.ObserveOnly,
  ReferenceNotAllowed:
    "A Connection refers to a Database in another namespace that does not allow it (spec.connectionPolicy.allowedNamespaces); nothing was minted.",
  // Expired
  DeletionProtected:
    "The Database is past its expiry (status.expiresAt) but spec.deletionProtection is true, so it is kept; set deletionProtection to false to let it be deleted, or remove the expiry.",
  NotExpired: "The Database's expiry (status.expiresAt) is ahead again (the spec changed after it had expired).",
  OutcomeUnknown:
    "A restore or backup was requested but its outcome cannot be known; it is never repeated automatically.",
  NotSupported:
    "The service does not take backups on request (the public API: its provider takes backups itself); nothing was requested and nothing is retried. Delete the resource, or point the operator at a service that does.",
} as const satisfies Record<LoopReason, string> & Record<string, string>;

export const ConditionReason = z.enum(
  Object.keys(conditionReasons) as [keyof typeof conditionReasons, ...(keyof typeof conditionReasons)[]],
);
export type ConditionReason = z.infer<typeof ConditionReason>;

// metav1.Condition, with the same limits so the CRD's validation matches what Kubernetes users expect.
export const Condition = z
  .object({
    // Open, as metav1.Condition's: a type a newer mds adds is kept through this version's status writes (a
    // rollback must not stall on it, nor drop it). The operator itself writes only ConditionType's.
    type: z
      .string()
      .min(1)
      .max(316)
      .regex(
        /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/,
      )
      .describe(
        "Condition type: Ready (usable), Synced (last reconcile succeeded), Reconciling (working toward the spec), Stalled (needs the user) or Expired (a Database past its expiry that deletionProtection keeps); a type a newer version of mds writes is kept and ignored.",
      ),
    status: ConditionStatus.describe("True, False or Unknown."),
    observedGeneration: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("metadata.generation of the spec this condition was computed from."),
    lastTransitionTime: z.iso
      .datetime()
      .describe("When the condition's status last changed (RFC 3339); it does not change when only the message does."),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      .describe("CamelCase reason for the condition's last transition; see the operator README for what each means."),
    message: z
      .string()
      .max(32768)
      .describe("Human-readable details: what happened and what to fix. Never contains secrets."),
  })
  .describe("A condition of the resource, as in metav1.Condition.");
export type Condition = z.infer<typeof Condition>;

export const Conditions = z
  .array(Condition)
  .max(8)
  .meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] })
  .describe(
    "Ready, Synced, Reconciling and (after an error only the user can fix) Stalled conditions, each with observedGeneration. " +
      "Reconciling is True while the operator works toward the spec, Stalled while only the user can help (kstatus, as Flux's health checks read them).",
  );

/**
 * The status the apiserver serves before any operator has written one (the CRDs' `status.default`): Reconciling=True,
 * so kstatus reads InProgress, not Current, while no operator runs or before it has looked (Gateway API does the same).
 * The epoch time marks it as a placeholder; the operator's first status write replaces it.
 */
export const awaitingOperatorStatus = {
  conditions: [
    {
      type: "Reconciling",
      status: "True",
      reason: "AwaitingOperator",
      message: "No operator has reconciled this resource yet",
      lastTransitionTime: "1970-01-01T00:00:00Z",
    },
  ],
};
