import { z } from "zod";
import { BackupId, BranchId, DatabaseId, ProjectId, WorkspaceId } from "./ids.ts";
import { Region } from "./regions.ts";

// Request bodies (docs/decisions.md#request-bodies). Strict: an unknown field is a 400 naming it, so a typo never passes silently.

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f]/;
export const Name = z
  .string()
  .trim()
  .min(1, { error: "must not be empty" })
  .max(64, { error: "must be at most 64 characters" })
  .refine((s) => !controlCharacters.test(s), { error: "must not contain control characters" });
const LogicalId = z.string().regex(/^[A-Za-z0-9._:/-]{1,128}$/, {
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

/**
 * A branch's git name, by the rules of `git check-ref-format --branch` (so every name git allows for a branch, and
 * nothing it refuses), bounded to 255 characters.
 */
const GitName = z
  .string({ error: "must be a string" })
  .min(1, { error: "must not be empty" })
  .max(255, { error: "must be at most 255 characters" })
  .superRefine((name, ctx) => {
    const bad = (why: string) => ctx.addIssue({ code: "custom", message: `is not a valid git branch name: ${why}` });
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name))
      return bad("it must not contain spaces, control characters or any of ~ ^ : ? * [ \\");
    if (name.includes("..")) return bad('it must not contain ".."');
    if (name.includes("@{") || name === "@") return bad('it must not contain "@{" or be "@"');
    if (name.startsWith("-")) return bad('it must not start with "-"');
    if (name.startsWith("/") || name.endsWith("/") || name.includes("//"))
      return bad('it must not start or end with "/" or contain "//"');
    if (name.endsWith(".")) return bad('it must not end with "."');
    if (name.split("/").some((part) => part.startsWith(".") || part.endsWith(".lock")))
      return bad('no part between "/" may start with "." or end with ".lock"');
  });

// The public API's branch fields on a database (SDK: "Every database belongs to a Branch, so null is rejected";
// branchId and branchGitName are mutually exclusive; `logicalId` is unique within a branch, so it cannot be combined
// with branchGitName on a create, nor with either on an update: move the database first, then set its logicalId).
const branchFields = {
  branchId: BranchId.optional(),
  branchGitName: GitName.optional(),
};
type BranchFields = {
  branchId?: string | undefined;
  branchGitName?: string | undefined;
  logicalId?: string | undefined;
};
function branchRules(update: boolean) {
  return (body: BranchFields, ctx: z.RefinementCtx) => {
    if (body.branchId !== undefined && body.branchGitName !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["branchGitName"],
        message: "cannot be combined with branchId: pass one of them",
      });
    }
    const moves = update
      ? body.branchId !== undefined || body.branchGitName !== undefined
      : body.branchGitName !== undefined;
    if (body.logicalId !== undefined && moves) {
      ctx.addIssue({
        code: "custom",
        path: ["logicalId"],
        message: update
          ? "cannot be combined with branchId or branchGitName in one request: move the database first, then set its logicalId"
          : "cannot be combined with branchGitName: pass branchId instead",
      });
    }
  };
}

export const CreateDatabaseBody = CreateProjectDatabaseBody.extend({
  projectId: ProjectId,
  ...branchFields,
}).superRefine(branchRules(false));
export type CreateDatabaseBody = z.input<typeof CreateDatabaseBody>;

export const UpdateDatabaseBody = z
  .strictObject({
    name: Name.optional(),
    isDefault: z.literal(true).optional(),
    /** Unique within the database's branch, as at creation (409 naming the holder). */
    logicalId: LogicalId.optional(),
    ...branchFields,
  })
  .superRefine(branchRules(true));
export type UpdateDatabaseBody = z.input<typeof UpdateDatabaseBody>;

/** POST /v1/projects/{id}/branches. A bad gitName is 422 (SDK), other bad fields 400 (docs/decisions.md#transport). */
export const CreateBranchBody = z.strictObject({ gitName: GitName, isDefault: z.boolean().optional() });
export type CreateBranchBody = z.input<typeof CreateBranchBody>;

/**
 * PATCH /v1/branches/{id}: only isDefault is mutable (SDK); `gitName` and `role` are taken only to refuse a change of
 * them (their current values are a no-op, so a client may send a branch back as it read it); anything else is 422.
 */
export const UpdateBranchBody = z.strictObject({
  isDefault: z.boolean().nullable().optional(),
  gitName: z.string().optional(),
  role: z.string().optional(),
});
export type UpdateBranchBody = z.input<typeof UpdateBranchBody>;

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

// Query strings arrive as strings; `limit` is never silently clamped (docs/decisions.md#lists).
export const Limit = z
  .string()
  .regex(/^[0-9]+$/, { error: "must be an integer from 1 to 100" })
  .transform(Number)
  .pipe(
    z
      .number()
      .int()
      .min(1, { error: "must be an integer from 1 to 100" })
      .max(100, { error: "must be an integer from 1 to 100" }),
  );

export const ListQuery = z.strictObject({ cursor: z.string().min(1).optional(), limit: Limit.optional() });
/** `branchId`: a branch's id, or "unassigned" for databases on no branch (SDK); `branchGitName`: a branch's git name. */
export const ListDatabasesQuery = ListQuery.extend({
  projectId: ProjectId.optional(),
  logicalId: LogicalId.optional(),
  branchId: z.union([z.literal("unassigned"), BranchId]).optional(),
  branchGitName: GitName.optional(),
});
/** GET /v1/projects/{id}/branches: `gitName` and `gitNameContains` are mutually exclusive (422, SDK). */
export const ListBranchesQuery = ListQuery.extend({
  gitName: z.string().min(1).max(255).optional(),
  gitNameContains: z.string().min(1).max(255).optional(),
});
export const ListProjectsQuery = ListQuery.extend({ logicalId: LogicalId.optional() });
export const ListBackupsQuery = z.strictObject({ limit: Limit.optional() });
export const ListConnectionsQuery = ListQuery.extend({ databaseId: DatabaseId.optional() });
export const UsageQuery = z
  .strictObject({
    startDate: z.iso.datetime({ offset: true }).optional(),
    endDate: z.iso.datetime({ offset: true }).optional(),
  })
  .refine((q) => !q.startDate || !q.endDate || Date.parse(q.startDate) <= Date.parse(q.endDate), {
    error: "must not be before startDate",
    path: ["endDate"],
  });

/** What a client passes to list calls (numbers, not strings). */
export type ListDatabasesParams = {
  cursor?: string;
  limit?: number;
  projectId?: string;
  logicalId?: string;
  branchId?: string;
  branchGitName?: string;
};
export type ListProjectsParams = { cursor?: string; limit?: number; logicalId?: string };
