import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import { CredentialStatus, LocalObjectReference, ObjectMeta } from "../common.ts";
import type { CrdDefinition } from "../kit/crd.ts";
import { age, condition } from "../kit/printer-columns.ts";

const BackupScheduleSpec = z
  .object({
    databaseRef: LocalObjectReference.describe(
      "The Database resource (same namespace) to back up; its own credentials are used.",
    ),
    schedule: z
      .string()
      .min(1)
      .max(100)
      .describe(
        'When to take a backup: a 5-field cron expression in UTC (minute hour day-of-month month day-of-week, e.g. "0 3 * * *"), or @hourly, @daily, @weekly, @monthly, @yearly.',
      ),
    keep: z
      .number()
      .int()
      .min(1)
      .max(100)
      .describe(
        "How many completed backups this schedule keeps: older ones it took are deleted at the service, with their DatabaseBackup resources. Backups it did not take are never touched. Each counts against the workspace's manual-backup quota.",
      ),
    suspend: z
      .boolean()
      .optional()
      .describe("Take no new backups while true (retention still runs); a slot missed meanwhile is not taken later."),
  })
  .describe("Backups of one database on a schedule, keeping the newest `keep`.");
type BackupScheduleSpec = z.infer<typeof BackupScheduleSpec>;

export const BackupScheduleStatus = z
  .object({
    databaseId: z.string().max(80).optional().describe("The resolved database (db_…)."),
    lastScheduleTime: z.iso
      .datetime()
      .optional()
      .describe("The newest slot a DatabaseBackup was created for (its name ends with the slot's minute)."),
    nextScheduleTime: z.iso.datetime().optional().describe("The next slot."),
    lastBackup: z.string().max(253).optional().describe("The DatabaseBackup of the newest slot."),
    kept: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Completed backups of this schedule that exist now (at most spec.keep after retention)."),
    message: z.string().max(32768).optional().describe("What happened last, in words."),
    credentials: CredentialStatus.optional(),
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("The schedule's slots and what it keeps.");
export type BackupScheduleStatus = z.infer<typeof BackupScheduleStatus>;

export const BackupSchedule = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("BackupSchedule"),
    metadata: ObjectMeta,
    spec: BackupScheduleSpec,
    status: BackupScheduleStatus.optional(),
  })
  .describe(
    "Takes a backup of a database at every slot of a cron schedule (one DatabaseBackup per slot, exactly once) and " +
      "keeps the newest `keep`, where the service takes and deletes backups on request (not the public API, whose " +
      "provider takes its own: there the resource stalls with reason NotSupported).",
  );
export type BackupSchedule = z.infer<typeof BackupSchedule>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const backupScheduleDefinition: CrdDefinition = {
  kind: "BackupSchedule",
  plural: "backupschedules",
  singular: "backupschedule",
  shortNames: ["mdsbackupschedule"],
  spec: BackupScheduleSpec,
  status: BackupScheduleStatus,
  whole: BackupSchedule,
  printerColumns: [
    { name: "DATABASE", type: "string", jsonPath: ".spec.databaseRef.name", description: "The Database backed up." },
    { name: "SCHEDULE", type: "string", jsonPath: ".spec.schedule", description: "The cron schedule (UTC)." },
    { name: "KEEP", type: "integer", jsonPath: ".spec.keep", description: "Completed backups kept." },
    { name: "KEPT", type: "integer", jsonPath: ".status.kept", description: "Completed backups it holds now." },
    { name: "LAST", type: "date", jsonPath: ".status.lastScheduleTime", description: "The newest slot taken." },
    // A string, not a date: kubectl shows a date as an age, and a future one as <invalid>.
    {
      name: "NEXT",
      type: "string",
      jsonPath: ".status.nextScheduleTime",
      description: "The next slot (UTC).",
      priority: 1,
    },
    condition("Ready"),
    condition("Stalled"),
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const BackupScheduleType: ResourceType = {
  group,
  version,
  plural: backupScheduleDefinition.plural,
  kind: "BackupSchedule",
  namespaced: true,
};
