import { z } from "zod";
import { BackupId, DatabaseId, ProjectId, WorkspaceId } from "./ids.ts";
import { Region } from "./regions.ts";

// Request bodies (CONTRACT §5). Strict: an unknown field is a 400 naming it, so a typo never passes silently.

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f]/;
export const Name = z
  .string()
  .trim()
  .min(1, { error: "must not be empty" })
  .max(64, { error: "must be at most 64 characters" })
  .refine((s) => !controlCharacters.test(s), { error: "must not contain control characters" });
export const LogicalId = z.string().regex(/^[A-Za-z0-9._:/-]{1,128}$/, {
  error: "must be 1-128 characters of A-Z a-z 0-9 . _ : / -",
});

export const SourceBody = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("empty") }),
  z.strictObject({ type: z.literal("backup"), databaseId: DatabaseId, backupId: BackupId }),
  // A clone: a copy of the live database's data at the moment the new database is provisioned.
  z.strictObject({ type: z.literal("database"), databaseId: DatabaseId }),
]);
export type SourceBody = z.infer<typeof SourceBody>;

export const CreateProjectBody = z.strictObject({
  name: Name.optional(),
  region: Region.optional(),
  workspaceId: WorkspaceId.optional(),
  createDatabase: z.boolean().optional(),
  logicalId: LogicalId.optional(),
});
export type CreateProjectBody = z.input<typeof CreateProjectBody>;

export const CreateProjectDatabaseBody = z.strictObject({
  name: Name.optional(),
  region: z.union([Region, z.literal("inherit")]).optional(),
  isDefault: z.boolean().optional(),
  source: SourceBody.optional(),
  logicalId: LogicalId.optional(),
});
export type CreateProjectDatabaseBody = z.input<typeof CreateProjectDatabaseBody>;

// The public API's branch fields (PUBLIC-API.md): this service has no branches, and attaching a database to a branch
// that does not exist must not pass silently, so they are refused with a message that says why.
const noBranches = z.never({ error: "branches are not supported by this service; omit this field" }).optional();
const branchFields = { branchId: noBranches, branchGitName: noBranches };

export const CreateDatabaseBody = CreateProjectDatabaseBody.extend({ projectId: ProjectId, ...branchFields });
export type CreateDatabaseBody = z.input<typeof CreateDatabaseBody>;

export const UpdateDatabaseBody = z.strictObject({
  name: Name.optional(),
  isDefault: z.literal(true).optional(),
  /** Unique per project, as at creation (409 naming the holder). */
  logicalId: LogicalId.optional(),
  ...branchFields,
});
export type UpdateDatabaseBody = z.input<typeof UpdateDatabaseBody>;

export const RestoreBody = z.strictObject({
  source: z.strictObject({ type: z.literal("backup"), databaseId: DatabaseId, backupId: BackupId }),
});
export type RestoreBody = z.input<typeof RestoreBody>;

export const CreateConnectionBody = z.strictObject({ name: Name });
export type CreateConnectionBody = z.input<typeof CreateConnectionBody>;

/** POST /v1/connections (the public API's form). */
export const CreateConnectionForDatabaseBody = CreateConnectionBody.extend({ databaseId: DatabaseId });
export type CreateConnectionForDatabaseBody = z.input<typeof CreateConnectionForDatabaseBody>;

/** POST /v1/connections/{id}/rotate takes no fields; an absent body is `{}`. */
export const RotateConnectionBody = z.strictObject({});

// Query strings arrive as strings; `limit` is never silently clamped (CONTRACT §7).
export const Limit = z
  .string()
  .regex(/^[0-9]+$/, { error: "must be an integer from 1 to 100" })
  .transform(Number)
  .pipe(z.number().int().min(1, { error: "must be an integer from 1 to 100" }).max(100, { error: "must be an integer from 1 to 100" }));

export const ListQuery = z.strictObject({ cursor: z.string().min(1).optional(), limit: Limit.optional() });
export const ListDatabasesQuery = ListQuery.extend({ projectId: ProjectId.optional(), logicalId: LogicalId.optional() });
export const ListProjectsQuery = ListQuery.extend({ logicalId: LogicalId.optional() });
export const ListBackupsQuery = z.strictObject({ limit: Limit.optional() });
export const ListConnectionsQuery = ListQuery.extend({ databaseId: DatabaseId.optional() });
export const UsageQuery = z
  .strictObject({ startDate: z.iso.datetime({ offset: true }).optional(), endDate: z.iso.datetime({ offset: true }).optional() })
  .refine((q) => !q.startDate || !q.endDate || Date.parse(q.startDate) <= Date.parse(q.endDate), { error: "must not be before startDate", path: ["endDate"] });

/** What a client passes to list calls (numbers, not strings). */
export type ListDatabasesParams = { cursor?: string; limit?: number; projectId?: string; logicalId?: string };
export type ListProjectsParams = { cursor?: string; limit?: number; logicalId?: string };
