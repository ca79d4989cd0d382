import { z } from "zod";
import type { ResourceType } from "../../kube/types.ts";
import { apiVersion, group, version } from "../group.ts";
import { Conditions } from "../conditions.ts";
import {
  DeletionProtection,
  Credentials,
  DeletionPolicy,
  LocalObjectReference,
  ObjectMeta,
  Region,
  exactlyOne,
  idPattern,
  immutableFields,
  managedStatusFields,
  ManagementPolicy,
} from "../common.ts";
import {
  Binding,
  ConnectionSecret,
  PublishedConnection,
  RotationStatus,
  secretNameUnchanged,
} from "../../operator/secret/spec.ts";
import type { CrdDefinition } from "../kit/crd.ts";
import { age, condition } from "../kit/printer-columns.ts";

const DatabaseSource = z
  .object({
    type: z
      .enum(["empty", "backup", "database"])
      .describe(
        "empty: a new, empty database. backup: a new database that starts with a backup's data. database: a clone, a new " +
          "database that starts with a copy of another database's data as it is when the clone is provisioned (the " +
          "source must be ready: until it is, the clone waits with Ready=False reason SourceNotReady and nothing is created).",
      ),
    databaseRef: LocalObjectReference.optional().describe(
      "type backup: the Database resource whose backup to use. type database: the Database resource (same namespace) to clone.",
    ),
    databaseId: z
      .string()
      .regex(idPattern("db"))
      .max(80)
      .optional()
      .describe(
        "type backup: the remote id (db_…) of the database whose backup to use. type database: the remote id of the " +
          "database to clone. Either needs spec.credentials (the operator's own token is never lent to read a database named by id).",
      ),
    backupId: z.string().regex(idPattern("bkp")).max(80).optional().describe("type backup: the backup (bkp_…) to use."),
    latest: z.boolean().optional().describe("type backup: true to use the source database's latest completed backup."),
  })
  .meta({
    "x-kubernetes-validations": [
      {
        rule: "self.type == 'empty' ? !has(self.databaseRef) && !has(self.databaseId) && !has(self.backupId) && !has(self.latest) : true",
        message: "source of type empty takes no databaseRef, databaseId, backupId or latest",
      },
      {
        rule: "self.type == 'backup' ? has(self.databaseRef) != has(self.databaseId) : true",
        message: "source of type backup needs exactly one of databaseRef.name or databaseId",
      },
      {
        rule: "self.type == 'backup' ? has(self.backupId) != (has(self.latest) && self.latest) : true",
        message: "source of type backup needs exactly one of backupId or latest: true",
      },
      {
        rule: "self.type == 'database' ? has(self.databaseRef) != has(self.databaseId) : true",
        message: "source of type database needs exactly one of databaseRef.name or databaseId",
      },
      {
        rule: "self.type == 'database' ? !has(self.backupId) && !has(self.latest) : true",
        message: "source of type database takes no backupId or latest (a clone copies the live database)",
      },
    ],
  })
  .describe(
    "What the database starts with: empty, a backup, or a clone of another database. Omitted means empty. Immutable.",
  );
type DatabaseSource = z.infer<typeof DatabaseSource>;

export const DatabaseBranch = z
  .object({
    gitName: z
      .string()
      .min(1)
      .max(255)
      .describe(
        "The branch's git name (a pull request's head branch, say); the branch is created if the project has none of that name.",
      ),
    role: z
      .enum(["preview", "production"])
      .default("preview")
      .describe(
        "preview (default): a branch of a project that already has its production branch; until it has one the " +
          "Database waits (Ready=False NoProductionBranch), because the service makes a project's first branch its " +
          "production branch, which can never be deleted. production: the project's production branch (its first, " +
          "e.g. main, on the long-lived Database a preview is cloned from).",
      ),
  })
  .describe(
    "Put the database on a branch of its project (the public API's preview environments), named by git name. A preview " +
      "branch the operator created is deleted (soft delete, as the public API does it) with its last database. Immutable.",
  );
export type DatabaseBranch = z.infer<typeof DatabaseBranch>;

const DatabaseSpec = z
  .object({
    projectRef: LocalObjectReference.optional().describe(
      "The Project resource (same namespace) this database belongs to. Exactly one of projectRef and projectId. Immutable.",
    ),
    projectId: z
      .string()
      .regex(idPattern("proj"))
      .max(80)
      .optional()
      .describe("The remote id (proj_…) of the project. Exactly one of projectRef and projectId. Immutable."),
    displayName: z
      .string()
      .trim()
      .min(1)
      .max(64)
      .optional()
      .describe("The database's name at the service. Defaults to the resource's name."),
    region: z
      .union([Region, z.literal("inherit")])
      .default("inherit")
      .meta({ enum: [...Region.options, "inherit"] })
      .describe("Region of the database; inherit (default) uses the project's default region. Immutable."),
    isDefault: z
      .boolean()
      .default(false)
      .describe(
        "Create this database as the project's default. Applied at creation only: the public API cannot change it afterwards, so a later edit is not sent.",
      ),
    source: DatabaseSource.optional(),
    connectionSecret: ConnectionSecret.optional(),
    connectionPolicy: z
      .object({
        allowedNamespaces: z
          .array(
            z
              .string()
              .max(63)
              .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?|\*)$/)
              .describe('A namespace name, or "*" for any.'),
          )
          .max(64)
          .optional()
          .describe(
            'Namespaces whose Connection resources may reference this database ("*": any). Its own always may.',
          ),
      })
      .optional()
      .describe(
        "Which other namespaces may hold Connection resources of this database, in the spirit of Gateway API's " +
          "ReferenceGrant: the database's owner grants it. A Connection elsewhere is refused and nothing is minted.",
      ),
    branch: DatabaseBranch.optional(),
    expireAfter: z
      .string()
      .max(32)
      .regex(/^(\d+(\.\d+)?(ms|s|m|h))+$/)
      .optional()
      .describe(
        "Delete this resource that long after it was created (a duration such as 72h or 90m), or after spec.expiryRenewal " +
          "last changed. The time is computed once and kept in status.expiresAt. The deletion follows deletionPolicy " +
          "(Retain keeps the remote database); with deletionProtection true nothing is deleted (condition Expired says so). " +
          "A Warning Event (reason Expiring) comes an hour before, or a tenth of the lifetime when that is shorter. " +
          "At most one of expireAfter and expiresAt.",
      ),
    expiresAt: z.iso
      .datetime({ offset: true })
      .optional()
      .describe(
        "Delete this resource at this time (RFC 3339), as expireAfter does. At most one of expireAfter and expiresAt.",
      ),
    expiryRenewal: z
      .string()
      .max(253)
      .optional()
      .describe(
        "With expireAfter: any value (a pull request's head commit, say); when it changes, expireAfter counts again from " +
          "when the operator sees the new value, so a preview expires that long after the last push.",
      ),
    credentials: Credentials.optional(),
    deletionPolicy: DeletionPolicy,
    deletionProtection: DeletionProtection,
    managementPolicy: ManagementPolicy,
    externalId: z
      .string()
      .regex(idPattern("db"))
      .max(80)
      .optional()
      .describe(
        "Adopt this existing remote database (db_…) instead of creating one; the operator mints a connection for its " +
          "Secret. Immutable.",
      ),
    trackLatestBackup: z
      .boolean()
      .optional()
      .describe(
        "Read the service's backup list for status.latestBackup and mds_database_backup_age_seconds (every 10 minutes " +
          "at most) even without a BackupSchedule or DatabaseBackup of this database, e.g. to watch the daily backups " +
          "the service or the public API's provider takes. Without it, and without either of those, backups are not " +
          "read (no API call) and the database has no backup-age series.",
      ),
  })
  .meta({
    "x-kubernetes-validations": [
      exactlyOne("projectRef", "projectId", "projectRef.name or projectId"),
      ...immutableFields("projectRef", "projectId", "region", "source", "externalId", "branch"),
      {
        rule: "!(has(self.expireAfter) && has(self.expiresAt))",
        message: "set at most one of expireAfter and expiresAt",
      },
      { rule: "has(self.expiryRenewal) ? has(self.expireAfter) : true", message: "expiryRenewal needs expireAfter" },
      {
        rule: "has(self.branch) ? !has(self.externalId) : true",
        message: "branch cannot be combined with externalId (an adopted database stays on its branch)",
      },
      secretNameUnchanged,
    ],
  })
  .describe("Desired state of a database at the Managed Database Service.");
type DatabaseSpec = z.infer<typeof DatabaseSpec>;

const RemoteStatus = z
  .enum(["provisioning", "ready", "recovering", "failure"])
  .describe("The database's status at the service.");
type RemoteStatus = z.infer<typeof RemoteStatus>;

const Endpoint = z
  .object({
    host: z.string().max(253).describe("Host name or address."),
    port: z.number().int().min(1).max(65535).describe("TCP port."),
  })
  .describe("A network endpoint (no credentials).");

/** status.latestBackup: the newest completed backup as the service lists it (latest-backup.ts reads it). */
const LatestBackup = z
  .object({
    id: z.string().max(80).describe("The backup's id (bkp_…)."),
    time: z.iso.datetime().describe("When the backup was taken (its createdAt at the service)."),
    sizeBytes: z.number().int().min(0).optional().describe("Its size in bytes, where the service reports one."),
  })
  .describe(
    "The newest completed backup of the database, from the service's list (read again as soon as a DatabaseBackup of it succeeds, otherwise at resyncs, at most once a minute).",
  );

// One entry per restore idempotencyKey ever applied to this database. It is mirrored on the connection Secret
// (annotation mds.dev/restores), which outlives the Database resource, so a re-created Database still remembers.
export const RestoreLedgerEntry = z
  .object({
    key: z.string().min(1).max(253).describe("The restore's idempotencyKey."),
    backupId: z.string().max(80).optional().describe("The backup restored (bkp_…)."),
    sourceDatabaseId: z.string().max(80).optional().describe("The database the backup belongs to (db_…)."),
    restore: z.string().max(253).optional().describe("Name of the DatabaseRestore that requested it."),
    phase: z.enum(["Running", "Succeeded", "Failed"]).describe("Outcome of the restore as far as known."),
    requestedAt: z.iso.datetime().optional().describe("When the restore was requested from the service."),
    completedAt: z.iso.datetime().optional().describe("When the restore ended."),
  })
  .describe("A restore applied to this database.");
export type RestoreLedgerEntry = z.infer<typeof RestoreLedgerEntry>;

export const restoreLedgerLimit = 20;

export const DatabaseStatus = z
  .object({
    id: z.string().max(80).optional().describe("The remote database's id (db_…)."),
    projectId: z.string().max(80).optional().describe("The remote project's id (proj_…)."),
    remoteStatus: RemoteStatus.optional(),
    region: z.string().max(64).optional().describe("The database's region as the service reports it."),
    connection: PublishedConnection.optional(),
    endpoints: z
      .object({
        direct: Endpoint.optional().describe("The PostgreSQL server."),
        pooled: Endpoint.optional().describe("The pooler, or the direct endpoint when the region has none."),
      })
      .optional()
      .describe("Where the database can be reached (credentials are only in the Secret)."),
    secretName: z.string().max(253).optional().describe("Name of the connection Secret."),
    binding: Binding.optional(),
    rotation: RotationStatus.optional(),
    source: z
      .object({
        type: z.enum(["backup", "database"]).describe("backup: restored from a backup. database: a clone."),
        databaseId: z.string().max(80).describe("The source database's remote id (db_…)."),
        backupId: z.string().max(80).optional().describe("type backup: the backup (bkp_…) it started from."),
      })
      .optional()
      .describe("What the database was created from, as sent to the service (absent: empty, or adopted)."),
    branch: z
      .object({
        id: z.string().max(80).describe("The branch's remote id (br_…)."),
        gitName: z.string().max(255).describe("The branch's git name."),
        role: z.string().max(32).describe("production or preview."),
      })
      .optional()
      .describe("The branch the database was put on (spec.branch)."),
    expiresAt: z.iso
      .datetime()
      .optional()
      .describe("When this resource expires and is deleted (spec.expireAfter or spec.expiresAt), computed once."),
    expiryCountsFrom: z.iso
      .datetime()
      .optional()
      .describe("Where spec.expireAfter counts from: the creation, or when spec.expiryRenewal last changed."),
    expiryRenewal: z.string().max(253).optional().describe("The spec.expiryRenewal that expiryCountsFrom belongs to."),
    expiryWarnedFor: z.iso.datetime().optional().describe("The expiresAt whose Expiring Event was emitted."),
    restoreLedger: z
      .array(RestoreLedgerEntry)
      .max(restoreLedgerLimit)
      .optional()
      .describe(`Restores applied to this database, newest last, at most ${restoreLedgerLimit}.`),
    latestBackup: LatestBackup.optional(),
    ...managedStatusFields,
    observedGeneration: z.number().int().min(0).optional().describe("The metadata.generation last reconciled."),
    conditions: Conditions.optional(),
  })
  .describe("Observed state of the database.");
export type DatabaseStatus = z.infer<typeof DatabaseStatus>;

export const Database = z
  .object({
    apiVersion: z.literal(apiVersion),
    kind: z.literal("Database"),
    metadata: ObjectMeta,
    spec: DatabaseSpec,
    status: DatabaseStatus.optional(),
  })
  .describe("A PostgreSQL database at the Managed Database Service, with its credentials in a connection Secret.");
export type Database = z.infer<typeof Database>;

/** The CRD's names and printer columns (src/resources/kit/crd.ts builds the CustomResourceDefinition from it). */
export const databaseDefinition: CrdDefinition = {
  kind: "Database",
  plural: "databases",
  singular: "database",
  shortNames: ["mdsdb"],
  spec: DatabaseSpec,
  status: DatabaseStatus,
  whole: Database,
  printerColumns: [
    condition("Ready"),
    condition("Synced"),
    { name: "STATUS", type: "string", jsonPath: ".status.remoteStatus", description: "Remote status." },
    { name: "SECRET", type: "string", jsonPath: ".status.secretName", description: "Connection Secret." },
    { name: "ID", type: "string", jsonPath: ".status.id", description: "Remote database id." },
    // A string, not a date: kubectl prints a future date as <invalid>.
    { name: "EXPIRES", type: "string", jsonPath: ".status.expiresAt", description: "When the resource expires." },
    { name: "PROJECT", type: "string", jsonPath: ".status.projectId", description: "Remote project id.", priority: 1 },
    { name: "BRANCH", type: "string", jsonPath: ".status.branch.gitName", description: "Branch.", priority: 1 },
    { name: "REGION", type: "string", jsonPath: ".status.region", description: "Region.", priority: 1 },
    age,
  ],
};

/** The kind's address for the Kubernetes client. */
export const DatabaseType: ResourceType = {
  group,
  version,
  plural: databaseDefinition.plural,
  kind: "Database",
  namespaced: true,
};

/** A Database as the loop hands it to the kind's code: parsed, with the fields every object has. */
export type DatabaseObject = Database & {
  apiVersion: string;
  kind: string;
  metadata: Database["metadata"] & { name: string };
};
