import type pg from "pg";
import { newId } from "../../contract/index.ts";
import type { ServiceConfig } from "../config/config.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { conflict, echo, invalidRequest, notFound, unprocessable } from "../shared/errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { decodeCursor, paginate } from "../store/pagination.ts";
import type { BranchRow, ProjectRow } from "../store/rows.ts";
import { findBranch, getBranch, getProject, listBranches } from "../store/queries.ts";
import { inTransaction } from "../store/pool.ts";

// Branches, as the public API has them (PUBLIC-API.md "Branches"): the first branch of a project is its production
// and default branch, every later one a preview; only the default flag moves; a branch is soft-deleted, and only
// when it is neither the default nor production and no live database is on it. A project has no branch until one is
// made; its first branch takes the databases it already has, so from then on every database is on a branch.
//
// Locks, always in this order so nothing deadlocks: the project (KEY SHARE to add to it), then the project's branch
// lock (an advisory lock, exclusive to decide "is this the first branch", "does this git name exist" and the default
// flag; shared by database creates that pick a branch, so a first branch sees every database made before it), then a
// branch row (KEY SHARE to put a database on it, UPDATE to delete it: a delete waits for a database being put on the
// branch, then counts it), then database rows.

/** The project's branch lock: "exclusive" to change its set of branches, "shared" to pick one of them. */
async function lockBranches(
  client: pg.PoolClient,
  projectId: string,
  mode: "exclusive" | "shared" = "exclusive",
): Promise<void> {
  const fn = mode === "exclusive" ? "pg_advisory_xact_lock" : "pg_advisory_xact_lock_shared";
  await client.query(`SELECT ${fn}(hashtextextended($1, 0))`, [`branches of ${projectId}`]);
}

type BranchLimits = Pick<ServiceConfig, "branchesPerProject" | "branchesPerWorkspace">;

// Any fixed number (with the workspace's hash): serialises one workspace's branch creations from the count to commit.
const quotaLock = 7_221_025;

/**
 * Branches are only control rows, but a workspace could make them without end at its rate limit: live branches are
 * capped per project (`inProject` counted under the project's exclusive branch lock) and per workspace (under a
 * workspace lock, taken after the project's). A deleted branch no longer counts.
 */
async function checkBranchQuota(
  client: pg.PoolClient,
  limits: BranchLimits,
  project: ProjectRow,
  inProject: number,
): Promise<void> {
  const hint = (setting: string) =>
    `delete a branch you no longer use (DELETE /v1/branches/{id}), or ask the service's operator to raise ${setting}`;
  if (inProject >= limits.branchesPerProject)
    throw conflict(
      `cannot create a branch: project "${project.id}" has ${inProject} live branches, its limit is ${limits.branchesPerProject}`,
      hint("branchesPerProject"),
    );
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [quotaLock, project.workspace_id]);
  const { rows } = await client.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM branches WHERE workspace_id = $1 AND deleted_at IS NULL",
    [project.workspace_id],
  );
  if (rows[0]!.n >= limits.branchesPerWorkspace)
    throw conflict(
      `cannot create a branch: this workspace has ${rows[0]!.n} live branches, its limit is ${limits.branchesPerWorkspace}`,
      hint("branchesPerWorkspace"),
    );
}

/**
 * Inserts a branch under the exclusive branch lock: the project's first is production and default whatever was
 * asked, and takes the project's live databases (until then on no branch: logicalIds stay unique, the branch is new).
 */
async function insertBranch(
  client: pg.PoolClient,
  limits: BranchLimits,
  project: ProjectRow,
  gitName: string,
  wantDefault: boolean,
): Promise<BranchRow> {
  const { rows } = await client.query<{ n: string }>(
    "SELECT count(*) AS n FROM branches WHERE project_id = $1 AND deleted_at IS NULL",
    [project.id],
  );
  await checkBranchQuota(client, limits, project, Number(rows[0]!.n));
  const first = Number(rows[0]!.n) === 0;
  const isDefault = first || wantDefault;
  if (isDefault && !first)
    await client.query(
      "UPDATE branches SET is_default = false, updated_at = now() WHERE project_id = $1 AND is_default AND deleted_at IS NULL",
      [project.id],
    );
  const id = newId("branch");
  await client.query(
    "INSERT INTO branches (id, project_id, workspace_id, git_name, is_default, role) VALUES ($1, $2, $3, $4, $5, $6)",
    [id, project.id, project.workspace_id, gitName, isDefault, first ? "production" : "preview"],
  );
  if (first)
    await client.query(
      "UPDATE databases SET branch_id = $2 WHERE project_id = $1 AND branch_id IS NULL AND deleted_at IS NULL",
      [project.id, id],
    );
  return (await getBranch(client, project.workspace_id, id, "share"))!;
}

/** POST /v1/projects/{id}/branches, in one transaction with its Idempotency-Key record. 409 for a live git name. */
export async function createBranch(
  deps: ServiceDeps,
  request: CreationRequest,
  projectId: string,
  input: { gitName: string; isDefault?: boolean | undefined },
  respond: (created: BranchRow) => StoredResponse,
): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const project = await getProject(client, request.workspaceId, projectId, "share");
    if (!project) throw notFound("project", projectId);
    await lockBranches(client, projectId);
    const existing = await findBranch(client, projectId, { gitName: input.gitName });
    if (existing)
      throw conflict(
        `cannot create branch: gitName ${echo(input.gitName, 255)} is already used by branch "${existing.id}"`,
        `existing branch id: ${existing.id}`,
      );
    return respond(await insertBranch(client, deps.config, project, input.gitName, input.isDefault ?? false));
  });
}

/** A page of the project's live branches, oldest first; unknown project: 404. */
export async function branchPage(
  deps: ServiceDeps,
  workspaceId: string,
  projectId: string,
  q: {
    cursor?: string | undefined;
    limit?: number | undefined;
    gitName?: string | undefined;
    gitNameContains?: string | undefined;
  },
) {
  if (q.gitName !== undefined && q.gitNameContains !== undefined) {
    throw unprocessable(
      "gitName and gitNameContains cannot be combined",
      "pass gitName for an exact match or gitNameContains for a substring, not both",
    );
  }
  const project = await getProject(deps.pool, workspaceId, projectId);
  if (!project) throw notFound("project", projectId);
  const limit = q.limit ?? 100;
  return paginate(
    await listBranches(deps.pool, {
      projectId,
      gitName: q.gitName,
      gitNameContains: q.gitNameContains,
      cursor: decodeCursor(q.cursor),
      limit,
    }),
    limit,
  );
}

export async function readBranch(deps: ServiceDeps, workspaceId: string, id: string): Promise<BranchRow> {
  const branch = await getBranch(deps.pool, workspaceId, id);
  if (!branch) throw notFound("branch", id);
  return branch;
}

/**
 * PATCH: `isDefault: true` makes it the project's default (the flag only, not the role); the default cannot be
 * demoted; `gitName` and `role` cannot change (their current values change nothing).
 */
export async function updateBranch(
  deps: ServiceDeps,
  workspaceId: string,
  id: string,
  input: { isDefault?: boolean | null | undefined; gitName?: string | undefined; role?: string | undefined },
): Promise<BranchRow> {
  await inTransaction(deps.pool, async (client) => {
    const found = await getBranch(client, workspaceId, id);
    if (!found) throw notFound("branch", id);
    await lockBranches(client, found.project_id);
    const branch = await getBranch(client, workspaceId, id, "update");
    if (!branch) throw notFound("branch", id);
    if (input.gitName !== undefined && input.gitName !== branch.git_name) {
      throw unprocessable(
        `a branch's gitName cannot be changed (branch "${id}" is ${echo(branch.git_name, 255)})`,
        "create a branch with the new gitName and move the databases to it",
      );
    }
    if (input.role !== undefined && input.role !== branch.role) {
      throw unprocessable(
        `a branch's role cannot be changed (branch "${id}" is ${branch.role})`,
        "a project's first branch is its production branch, every later one a preview; only isDefault can be changed",
      );
    }
    if (input.isDefault === false && branch.is_default) {
      throw unprocessable(
        `branch "${id}" is the project's default and cannot be demoted`,
        "make another branch the default instead (PATCH it with isDefault: true)",
      );
    }
    if (input.isDefault === true && !branch.is_default) {
      await client.query(
        "UPDATE branches SET is_default = false, updated_at = now() WHERE project_id = $1 AND is_default AND deleted_at IS NULL",
        [branch.project_id],
      );
      await client.query("UPDATE branches SET is_default = true, updated_at = now() WHERE id = $1", [id]);
    }
  });
  return readBranch(deps, workspaceId, id);
}

/** Soft delete: 422 for the default or production branch, 409 while a live database is on it. */
export async function deleteBranch(deps: ServiceDeps, workspaceId: string, id: string): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const found = await getBranch(client, workspaceId, id);
    if (!found) throw notFound("branch", id);
    await lockBranches(client, found.project_id);
    // FOR UPDATE waits for a database being put on the branch (it holds KEY SHARE), so the count below includes it.
    const branch = await getBranch(client, workspaceId, id, "update");
    if (!branch) throw notFound("branch", id);
    if (branch.role === "production")
      throw unprocessable(
        `branch "${id}" is the project's production branch and cannot be deleted`,
        "a project's production branch goes with its project",
      );
    if (branch.is_default)
      throw unprocessable(
        `branch "${id}" is the project's default branch and cannot be deleted`,
        "make another branch the default first (PATCH it with isDefault: true)",
      );
    const { rows } = await client.query<{ n: string }>(
      "SELECT count(*) AS n FROM databases WHERE branch_id = $1 AND deleted_at IS NULL",
      [id],
    );
    const members = Number(rows[0]!.n);
    if (members > 0)
      throw conflict(
        `cannot delete branch "${id}": ${members} database(s) are still on it`,
        `delete them or move them to another branch first (GET /v1/databases?branchId=${id})`,
      );
    await client.query("UPDATE branches SET deleted_at = now(), updated_at = now() WHERE id = $1", [id]);
  });
}

/**
 * The branch a database goes on, in the caller's transaction (after the project's lock, before any database row's):
 * `branchId` (of the same project), `branchGitName` (created as the public API does when the project has none of
 * that name), or neither: the project's default branch, or none when the project has no branch yet. The branch row
 * is held (KEY SHARE) until the caller commits, so it cannot be deleted under the database, and the branch lock
 * (shared) too, so a first branch made meanwhile waits and then takes this database.
 */
export async function branchForDatabase(
  client: pg.PoolClient,
  limits: BranchLimits,
  project: ProjectRow,
  input: { branchId?: string | undefined; branchGitName?: string | undefined },
): Promise<string | null> {
  if (input.branchGitName !== undefined) {
    await lockBranches(client, project.id, "exclusive");
    const existing = await findBranch(client, project.id, { gitName: input.branchGitName }, "share");
    return (existing ?? (await insertBranch(client, limits, project, input.branchGitName, false))).id;
  }
  await lockBranches(client, project.id, "shared");
  if (input.branchId !== undefined) {
    const branch = await getBranch(client, project.workspace_id, input.branchId, "share");
    if (!branch) throw notFound("branch", input.branchId);
    if (branch.project_id !== project.id) {
      throw unprocessable(
        `branch "${branch.id}" belongs to project "${branch.project_id}", not to the database's project "${project.id}"`,
        "pass a branch of the database's project (or branchGitName to use or create one there)",
      );
    }
    return branch.id;
  }
  return (await findBranch(client, project.id, "default", "share"))?.id ?? null;
}

/** GET /v1/databases: `branchId` and `branchGitName` are two ways to name one branch, so not both. */
export function checkBranchFilter(q: { branchId?: string | undefined; branchGitName?: string | undefined }): void {
  if (q.branchId !== undefined && q.branchGitName !== undefined)
    throw invalidRequest("invalid query: branchId and branchGitName cannot be combined", "filter by one of them");
}
