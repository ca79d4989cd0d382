import { randomBytes } from "node:crypto";
import { z } from "zod";

// The seed's id patterns. Path ids are checked against them before any lookup (docs/decisions.md#identifiers).
export const projectIdPattern = /^(proj_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;
export const databaseIdPattern = /^(db_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;
// Our own ids for the extensions follow the same shape with their own prefixes.
export const connectionIdPattern = /^(con_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;
export const backupIdPattern = /^(bkp_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;
const workspaceIdPattern = /^(wksp_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;
// The public API's branch ids (`br_…`, SDK: "/v1/databases?branchId=<br_xxx>").
export const branchIdPattern = /^(br_)?([cC][^\s-]{8,}|[a-z0-9]+)$/;

export const ProjectId = z.string().regex(projectIdPattern, { error: `must match ${projectIdPattern.source}` });
export const DatabaseId = z.string().regex(databaseIdPattern, { error: `must match ${databaseIdPattern.source}` });
export const ConnectionId = z
  .string()
  .regex(connectionIdPattern, { error: `must match ${connectionIdPattern.source}` });
export const BackupId = z.string().regex(backupIdPattern, { error: `must match ${backupIdPattern.source}` });
export const WorkspaceId = z.string().regex(workspaceIdPattern, { error: `must match ${workspaceIdPattern.source}` });
export const BranchId = z.string().regex(branchIdPattern, { error: `must match ${branchIdPattern.source}` });

const idPrefixes = {
  project: "proj_",
  database: "db_",
  connection: "con_",
  backup: "bkp_",
  workspace: "wksp_",
  branch: "br_",
} as const;
type IdKind = keyof typeof idPrefixes;

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";

/** A cuid-like id: prefix + "c" + 24 lowercase letters or digits, from a CSPRNG. */
export function newId(kind: IdKind): string {
  const bytes = randomBytes(24);
  let body = "c";
  for (const b of bytes) body += alphabet[b % alphabet.length];
  return idPrefixes[kind] + body;
}
