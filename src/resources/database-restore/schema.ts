import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import { Credentials, CredentialStatus, LocalObjectReference, ObjectMeta, exactlyOne, idPattern } from "../common.ts";
import type { CrdDefinition } from "../kit/crd.ts";
import { age } from "../kit/printer-columns.ts";

const databaseId = z.string().regex(idPattern("db")).max(80);

const RestoreTarget = z
  .object({
    databaseRef: LocalObjectReference.optional().describe(
      "The Database resource (same namespace) whose data is replaced.",
    ),
    databaseId: databaseId.optional().describe("The remote id (db_…) of the database whose data is replaced."),
  })
  .meta({
    "x-kubernetes-validations": [
      exactlyOne("databaseRef", "databaseId", "target.databaseRef.name or target.databaseId"),
    ],
  })
  .describe("The database to restore into. Its data is replaced; its credentials keep working.");
type RestoreTarget = z.infer<typeof RestoreTarget>;

const RestoreSource = z
  .object({
    databaseRef: LocalObjectReference.optional().describe(
      "The Database resource (same namespace) whose backup is restored.",
    ),
    databaseId: databaseId.optional().describe("The remote id (db_…) of the database whose backup is restored."),
    backupId: z.string().regex(idPattern("bkp")).max(80).optional().describe("The backup to restore (bkp_…)."),
    latest: z
      .boolean()
      .optional()
      .describe("true: restore the source's latest completed backup, resolved once and recorded in status.backupId."),
  })
  .meta({
    "x-kubernetes-validations": [
      exactlyOne("databaseRef", "databaseId", "source.databaseRef.name or source.databaseId"),
      {
        rule: "has(self.backupId) != (has(self.latest) && self.latest)",
        message: "exactly one of source.backupId or source.latest: true must be set",
      },
    ],
  })
  .describe("The backup to restore: whose (databaseRef or databaseId) and which (backupId or latest).");
type RestoreSource = z.infer<typeof RestoreSource>;

const DatabaseRestoreSpec = z
  .object({
    target: RestoreTarget,
    source: RestoreSource,
    idempotencyKey: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[A-Za-z0-9._:/-]+$/)
      .optional()
      .describe(
        "The restore runs at most once per key and target, even if this resource is deleted and re-applied. " +
          "Defaults to <namespace>/<name>. Use a new key (or name) to restore again.",
      ),
    credentials: Credentials.optional().describe(
      "The API token, required when target or source is a databaseId (the operator's own token is never lent to act on " +
        "an arbitrary id). Without it the target Database's own credentials are used.",
    ),
  })
  .meta({
    "x-kubernetes-validations": [
      { rule: "self == oldSelf", message: "spec is immutable: create a new DatabaseRestore to restore again" },
      {
        rule: "!(has(self.target.databaseId) || has(self.source.databaseId)) || has(self.credentials)",
        message:
          "a restore by databaseId (target or source) needs credentials.secretRef: a token of the database's workspace in this namespace",
      },
    ],
  })
  .describe("A one-shot restore of a backup into a database. Immutable.");
type DatabaseRestoreSpec = z.infer<typeof DatabaseRestoreSpec>;

export const RestorePhase = z
  .enum(["Pending", "Running", "Succeeded", "Failed", "Skipped"])
  .describe(
    "Pending → Running → Succeeded | Failed; Skipped when the key was already applied to the target. " +
      "Succeeded, Failed and Skipped are final.",
  );
export type RestorePhase = z.infer<typeof RestorePhase>;
export const terminalRestorePhases: readonly RestorePhase[] = ["Succeeded", "Failed", "Skipped"];

export const DatabaseRestoreStatus = z
  .object({
    phase: RestorePhase.optional(),
    reason: z
      .string()
      .max(128)
      .optional()
      .describe("CamelCase reason for the phase, e.g. OutcomeUnknown when a restore's outcome cannot be known."),
    message: z.string().max(32768).optional().describe("What happened, in words."),
    idempotencyKey: z.string().max(253).optional().describe("The key in effect (spec.idempotencyKey or its default)."),
    targetDatabaseId: z.string().max(80).optional().describe("The resolved target database (db_…)."),
    sourceDatabaseId: z.string().max(80).optional().describe("The resolved source database (db_…)."),
    backupId: z
      .string()
      .max(80)
      .optional()
      .describe("The resolved backup (bkp_…), recorded before the restore starts."),
    requestedAt: z.iso
      .datetime()
      .optional()
      .describe("When the restore was requested; written before the request is sent."),
    targetSourceBefore: z
      .string()
      .max(256)
      .optional()
      .describe(
        "The target's source as the service reported it just before the request (type:databaseId:backupId): a restore whose answer was lost shows as its change.",
      ),
    completedAt: z.iso.datetime().optional().describe("When the restore reached a final phase."),
    credentials: CredentialStatus.optional(),
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("Progress of the restore.");
export type DatabaseRestoreStatus = z.infer<typeof DatabaseRestoreStatus>;

export const DatabaseRestore = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("DatabaseRestore"),
    metadata: ObjectMeta,
    spec: DatabaseRestoreSpec,
    status: DatabaseRestoreStatus.optional(),
  })
  .describe(
    "Restores a backup into a database, destructively and exactly once per idempotencyKey. Credentials are kept.",
  );
export type DatabaseRestore = z.infer<typeof DatabaseRestore>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const databaseRestoreDefinition: CrdDefinition = {
  kind: "DatabaseRestore",
  plural: "databaserestores",
  singular: "databaserestore",
  shortNames: ["mdsrestore"],
  spec: DatabaseRestoreSpec,
  status: DatabaseRestoreStatus,
  whole: DatabaseRestore,
  printerColumns: [
    { name: "PHASE", type: "string", jsonPath: ".status.phase", description: "Phase of the restore." },
    { name: "TARGET", type: "string", jsonPath: ".status.targetDatabaseId", description: "Target database id." },
    { name: "BACKUP", type: "string", jsonPath: ".status.backupId", description: "Restored backup id." },
    { name: "COMPLETED", type: "date", jsonPath: ".status.completedAt", description: "When it ended." },
    { name: "REASON", type: "string", jsonPath: ".status.reason", description: "Reason of the phase.", priority: 1 },
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const DatabaseRestoreType: ResourceType = {
  group,
  version,
  plural: databaseRestoreDefinition.plural,
  kind: "DatabaseRestore",
  namespaced: true,
};
