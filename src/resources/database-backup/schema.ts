import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import { Credentials, CredentialStatus, LocalObjectReference, ObjectMeta, exactlyOne, idPattern } from "../common.ts";
import type { CrdDefinition } from "../kit/crd.ts";
import { age, condition } from "../kit/printer-columns.ts";

const DatabaseBackupSpec = z
  .object({
    databaseRef: LocalObjectReference.optional().describe("The Database resource (same namespace) to back up."),
    databaseId: z
      .string()
      .regex(idPattern("db"))
      .max(80)
      .optional()
      .describe("The remote id (db_…) of the database to back up; needs credentials (a token of its workspace)."),
    idempotencyKey: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[A-Za-z0-9._:/-]+$/)
      .optional()
      .describe(
        "One backup per key and database: a resource re-applied with the same key within the service's replay " +
          "window (24 h) gets the same backup back. Defaults to this resource's uid (every new resource, a new backup).",
      ),
    credentials: Credentials.optional().describe(
      "The API token, required with databaseId (the operator's own token is never lent to act on an arbitrary id). " +
        "Without it the Database's own credentials are used.",
    ),
  })
  .meta({
    "x-kubernetes-validations": [
      exactlyOne("databaseRef", "databaseId", "databaseRef.name or databaseId"),
      { rule: "self == oldSelf", message: "spec is immutable: create a new DatabaseBackup to take another backup" },
      {
        rule: "!has(self.databaseId) || has(self.credentials)",
        message:
          "a backup by databaseId needs credentials.secretRef: a token of the database's workspace in this namespace",
      },
    ],
  })
  .describe("A one-shot backup of a database, taken exactly once. Immutable.");
type DatabaseBackupSpec = z.infer<typeof DatabaseBackupSpec>;

export const BackupPhase = z
  .enum(["Pending", "Running", "Succeeded", "Failed"])
  .describe("Pending → Running → Succeeded | Failed. Succeeded and Failed are final.");
export type BackupPhase = z.infer<typeof BackupPhase>;
export const terminalBackupPhases: readonly BackupPhase[] = ["Succeeded", "Failed"];

export const DatabaseBackupStatus = z
  .object({
    phase: BackupPhase.optional(),
    reason: z
      .string()
      .max(128)
      .optional()
      .describe("CamelCase reason for the phase, e.g. OutcomeUnknown when a request's outcome cannot be known."),
    message: z.string().max(32768).optional().describe("What happened, in words."),
    idempotencyKey: z.string().max(253).optional().describe("The key in effect (spec.idempotencyKey or the uid)."),
    databaseId: z.string().max(80).optional().describe("The resolved database (db_…)."),
    requestedAt: z.iso
      .datetime()
      .optional()
      .describe("When the backup was requested; written before the request is sent."),
    backupId: z.string().max(80).optional().describe("The backup the service took (bkp_…)."),
    backupSeal: z
      .string()
      .max(100)
      .optional()
      .describe(
        "Written by the operator with backupId, from the service's answer to this resource's request: a tag over this resource's uid, the database and the backup that only a holder of the API token can compute. A BackupSchedule's retention deletes only backups whose seal checks.",
      ),
    takenAt: z.iso.datetime().optional().describe("The backup's time, as the service reports it (createdAt)."),
    completedAt: z.iso.datetime().optional().describe("When the backup reached a final phase."),
    sizeBytes: z.number().int().min(0).optional().describe("The backup's size in bytes, once completed."),
    credentials: CredentialStatus.optional(),
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("Progress of the backup.");
export type DatabaseBackupStatus = z.infer<typeof DatabaseBackupStatus>;

export const DatabaseBackup = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("DatabaseBackup"),
    metadata: ObjectMeta,
    spec: DatabaseBackupSpec,
    status: DatabaseBackupStatus.optional(),
  })
  .describe(
    "Takes one backup of a database, exactly once, where the service takes backups on request (not the public API, " +
      "whose provider takes them: there the resource stalls with reason NotSupported).",
  );
export type DatabaseBackup = z.infer<typeof DatabaseBackup>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const databaseBackupDefinition: CrdDefinition = {
  kind: "DatabaseBackup",
  plural: "databasebackups",
  singular: "databasebackup",
  shortNames: ["mdsbackup"],
  spec: DatabaseBackupSpec,
  status: DatabaseBackupStatus,
  whole: DatabaseBackup,
  printerColumns: [
    { name: "PHASE", type: "string", jsonPath: ".status.phase", description: "Phase of the backup." },
    { name: "DATABASE", type: "string", jsonPath: ".status.databaseId", description: "Backed-up database id." },
    { name: "BACKUP", type: "string", jsonPath: ".status.backupId", description: "The backup's id." },
    { name: "SIZE", type: "integer", jsonPath: ".status.sizeBytes", description: "Size in bytes." },
    { name: "COMPLETED", type: "date", jsonPath: ".status.completedAt", description: "When it ended." },
    condition("Stalled"),
    { name: "REASON", type: "string", jsonPath: ".status.reason", description: "Reason of the phase.", priority: 1 },
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const DatabaseBackupType: ResourceType = {
  group,
  version,
  plural: databaseBackupDefinition.plural,
  kind: "DatabaseBackup",
  namespaced: true,
};
