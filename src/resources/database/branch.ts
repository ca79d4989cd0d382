import type { CrashPoint } from "../../operator/crash-points.ts";
import type { PublicBranch } from "../../contract/index.ts";
import { errorCode, isApiConflict, isApiNotFound } from "../../operator/api.ts";
import type { MdsApi } from "../remote/remote-api.ts";
import { ReconcileError, TerminalError, WaitingError } from "../../operator/errors.ts";
import { incarnationKeyOf } from "../../operator/identity.ts";
import type { DatabaseBranch } from "./schema.ts";

/** Between the branch's creation and the database's on it (this kind's own crash point). */
export const branchCreated: CrashPoint = {
  name: "database:after-branch-create",
  between: "spec.branch's branch created → the database created on it",
  restart: "find the branch by git name (a second create of the name is a 409) and create the database once",
};

// spec.branch: a Database on a branch of its project, named by git name (docs/preview-environments.md).
// - The database is created with the branch's id, never its git name: the public API refuses logicalId together with
//   branchGitName, and the logicalId (unique within a branch) is what keeps a lost create from making a second one.
// - A branch is found by git name (unique among a project's live branches; a soft-deleted one is never found, its
//   name is free), else created: a second create of the same name is a 409, after which the live one is found, so two
//   Databases of one pull request racing end on one branch. Found again after a crash, so a lost answer creates
//   nothing twice.
// - The create's Idempotency-Key names the Database that asks (its uid), so a reopened pull request's new Database
//   never gets a soft-deleted branch's answer replayed (docs/design.md#keys-name-the-incarnation). Its own replay may
//   still name a branch soft-deleted since (another Database of the branch went with it meanwhile): a replayed
//   answer is checked against the live branches, and a dead one is asked for again under a key that names it.
// - The service makes a project's first branch its production branch, for good (it is never deleted, and it takes
//   the project's databases). A preview never becomes that by accident: it waits until the project has a branch.

/** The project's live branch of this git name, if any (never creates one). */
async function findBranch(api: MdsApi, projectId: string, gitName: string): Promise<PublicBranch | undefined> {
  const page = await api.listBranches(projectId, { gitName, limit: 1 });
  return page.data.find((b) => b.gitName === gitName);
}

/** How many soft-deleted branches one Database's create may have had replayed before it gives up for this reconcile. */
const deadReplaysAtMost = 3;

/** The branch the Database goes on: found, or created with the role the spec expects. */
async function ensureBranch(
  api: MdsApi,
  projectId: string,
  spec: DatabaseBranch,
  owner: { metadata: { uid?: string | undefined } },
  crashPoint: (name: string) => void | Promise<void>,
): Promise<PublicBranch> {
  const found = await findBranch(api, projectId, spec.gitName);
  if (found !== undefined) return checkRole(found, spec);
  const hasBranches = (await api.listBranches(projectId, { limit: 1 })).data.length > 0;
  if (spec.role === "preview" && !hasBranches) {
    throw new WaitingError(
      "NoProductionBranch",
      `project "${projectId}" has no branch yet, and the service makes a project's first branch its production branch, ` +
        `which can never be deleted; branch "${spec.gitName}" is created once the project has one (a Database with ` +
        `spec.branch {gitName: main, role: production}, say)`,
    );
  }
  if (spec.role === "production" && hasBranches) {
    throw new TerminalError(
      "BranchRoleMismatch",
      `project "${projectId}" already has branches, so a new branch "${spec.gitName}" would be a preview, not its ` +
        `production branch; name the project's production branch in spec.branch.gitName, or set role: preview`,
    );
  }
  const dead: string[] = [];
  for (;;) {
    let created: PublicBranch;
    try {
      created = await api.createBranch(
        projectId,
        { gitName: spec.gitName },
        { idempotencyKey: incarnationKeyOf(owner, "create-branch", projectId, spec.gitName, ...dead) },
      );
    } catch (err) {
      // Created meanwhile by another Database on the same branch, or by our own earlier POST whose answer was lost.
      const again = isApiConflict(err) ? await findBranch(api, projectId, spec.gitName) : undefined;
      if (again === undefined) throw err;
      return checkRole(again, spec);
    }
    await crashPoint(branchCreated.name);
    // Only a server that replays can have answered with a branch that is gone; elsewhere every answer is a new one.
    const live = api.replaysIdempotencyKeys() ? await findBranch(api, projectId, spec.gitName) : created;
    // Two production Databases racing on a project without branches: only the first branch is production.
    if (live !== undefined) return checkRole(live, spec);
    dead.push(created.id);
    if (dead.length >= deadReplaysAtMost) {
      throw new ReconcileError(
        "ReconcileError",
        `creating branch "${spec.gitName}" answered with branches that are deleted (${dead.join(", ")}); retrying`,
      );
    }
  }
}

function checkRole(branch: PublicBranch, spec: DatabaseBranch): PublicBranch {
  if (branch.role === spec.role) return branch;
  throw new TerminalError(
    "BranchRoleMismatch",
    `branch "${spec.gitName}" (${branch.id}) is the project's ${branch.role} branch, but spec.branch.role is ${spec.role}`,
  );
}

/**
 * Soft-deletes a preview branch once its last database is gone (the public API's rule: never the default or the
 * production branch, never one with a live database). Those refusals are answers, not failures: the branch stays.
 */
export async function deleteBranchIfEmpty(api: MdsApi, branchId: string): Promise<void> {
  try {
    await api.deleteBranch(branchId);
  } catch (err) {
    if (isApiNotFound(err) || isApiConflict(err) || errorCode(err) === "unprocessable") return;
    throw err;
  }
}

/** A project this token cannot see (another workspace's, or deleted meanwhile) has no branch of ours. */
const noneIfProjectUnseen = (err: unknown): undefined => {
  if (isApiNotFound(err)) return undefined;
  throw err;
};

/**
 * The branch one Database's spec.branch names, within one reconcile: found once (never created), or ensured. Found
 * in a project the token cannot see: none, so a Database named at such a project can still be deleted (its lookup
 * finds nothing, and no branch is deleted) instead of retrying forever.
 */
export function specBranch(api: MdsApi, projectId: string, crashPoint: (name: string) => void | Promise<void>) {
  let found: Promise<PublicBranch | undefined> | undefined;
  return {
    find: (spec: DatabaseBranch | undefined) =>
      spec === undefined
        ? Promise.resolve(undefined)
        : (found ??= findBranch(api, projectId, spec.gitName).catch(noneIfProjectUnseen)),
    /** Before a create: the branch, created for `owner` (the Database) if the project has none of this name. */
    async ensure(
      spec: DatabaseBranch | undefined,
      owner: { metadata: { uid?: string | undefined } },
    ): Promise<PublicBranch | undefined> {
      if (spec === undefined) return undefined;
      const branch = await ensureBranch(api, projectId, spec, owner, crashPoint);
      found = Promise.resolve(branch);
      return branch;
    },
  };
}

/** status.branch of a Database created or adopted on `branch`. */
export const branchStatusOf = (branch: PublicBranch | undefined) =>
  branch === undefined ? {} : { branch: { id: branch.id, gitName: branch.gitName, role: branch.role } };
