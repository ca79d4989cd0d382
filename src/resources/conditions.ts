import { z } from "zod";
import type { ReasonDoc } from "../operator/conditions.ts";

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

// The reasons of the service's model (remote/) and of references between kinds, which several kinds write. The
// loops' own are src/operator/conditions.ts's, a kind's own its module's; the registry joins the three
// (src/resources/index.ts `conditionReasons()`). The CRD accepts any CamelCase reason (as metav1.Condition does), so
// an older CRD never rejects a newer operator's status.
export const sharedReasons = {
  Provisioning: {
    condition: "Ready=False",
    argo: "Progressing",
    means: "The service is provisioning; the operator polls about every second.",
    fix: "Wait; the service's provisioning time dominates.",
  },
  Restoring: {
    condition: "Ready=False",
    argo: "Progressing",
    means: "A DatabaseRestore is replacing the data.",
    fix: "Wait for the DatabaseRestore's phase.",
  },
  RemoteFailure: {
    condition: "Ready=False",
    argo: "Degraded",
    means: "The service reports the database in status `failure`.",
    fix: "Read the message and the service's logs; delete and re-create the resource (or restore a backup into a new Database).",
  },
  DatabaseNotReady: {
    condition: "Synced=False",
    argo: "Progressing",
    means: "A Database this resource refers to (restore target or source, backup source) is missing or not Ready.",
    fix: "Check the name; wait for it.",
  },
  DatabaseNotAccepted: {
    condition: "Synced=False",
    argo: "Progressing",
    means:
      "The Database this resource refers to (a Connection's, a clone's source, a backup's, a restore's target or source, a schedule's) names a remote id in its `status.id` that its own reconcile has not accepted: it neither created that database nor adopts it by `spec.externalId`. Right after an operator start (or a leader change), every reference waits so until its Database's first reconcile, a moment.",
    fix: "Look at the Database: `AdoptionRefused` or `AdoptionConflict` there means its `status.id` names a database it does not own (written by hand): remove it (`kubectl patch … --subresource=status`) or adopt the database with `spec.externalId`.",
  },
  ReferenceNotAllowed: {
    condition: "Connection `Ready=False`, `Synced=False`",
    argo: "Degraded",
    means: "A Connection refers to a Database in another namespace that does not allow it; nothing was minted.",
    fix: "Add the Connection's namespace to the Database's `spec.connectionPolicy.allowedNamespaces`, or put the Connection in the Database's namespace.",
  },
  OutcomeUnknown: {
    condition: "DatabaseRestore or DatabaseBackup `Failed`",
    argo: "Degraded",
    means: "A restore or backup was requested but its outcome cannot be known; it is never repeated automatically.",
    fix: "Check the data (or list the database's backups); to try again create a new resource (new name or `idempotencyKey`).",
  },
  NotSupported: {
    condition: "DatabaseBackup `Failed`",
    argo: "Degraded",
    means:
      "The service does not take backups on request (the public API: its provider takes them); nothing was requested, nothing is retried.",
    fix: "Delete the DatabaseBackup; rely on the provider's backups, or point the operator at a service that takes them ([backups.md](backups.md)).",
  },
  WaitingForDatabases: {
    condition: "Ready=False",
    argo: "Progressing",
    means:
      "A deletion waits for other databases to go first: a Project with `deletionPolicy: Delete` for its databases, or (our service) a project's default database for the project's other databases.",
    fix: "Delete the other Databases, or set the Project's policy to `Retain`.",
  },
} as const satisfies Record<string, ReasonDoc>;

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
