import type { CreateDatabaseBody, PublicBranch, SourceBody } from "../../contract/index.ts";
import type { DatabaseObject } from "./schema.ts";

/** The creation request of `obj`: the same body every time (a replay must match the first POST). */
export function createBodyOf(
  obj: DatabaseObject,
  projectId: string,
  logicalId: string,
  source: SourceBody | undefined,
  branch: PublicBranch | undefined,
): CreateDatabaseBody {
  return {
    projectId,
    name: obj.spec.displayName ?? obj.metadata.name,
    region: obj.spec.region ?? "inherit",
    isDefault: obj.spec.isDefault ?? false,
    logicalId,
    // Always the branch's id with the logicalId: the public API refuses logicalId with branchGitName, and the
    // logicalId, unique within the branch, is what makes a second create of this resource a 409 (./branch.ts).
    ...(branch === undefined ? {} : { branchId: branch.id }),
    ...(source === undefined ? {} : { source }),
  };
}
