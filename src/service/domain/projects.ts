import { newId } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { conflict, notFound } from "../shared/errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { decodeCursor, paginate } from "../store/pagination.ts";
import type { ProjectRow } from "../store/rows.ts";
import { getProject, listProjects } from "../store/queries.ts";
import { inTransaction } from "../store/pool.ts";
import { logicalIdConflict } from "./logical-id.ts";
import { createDatabaseRows, generatedName, type NewDatabase } from "./new-database.ts";
import { resolveRegion } from "./regions.ts";

type NewProject = { project: ProjectRow; database: NewDatabase | null };

/**
 * POST /v1/projects: the project and (unless `createDatabase: false`) its default database, in one transaction with
 * the Idempotency-Key record. `respond` renders what was made: that rendering is what a replay returns.
 */
export async function createProject(
  deps: ServiceDeps,
  request: CreationRequest,
  input: {
    name?: string | undefined;
    region?: string | undefined;
    workspaceId?: string | undefined;
    createDatabase?: boolean | undefined;
    logicalId?: string | undefined;
  },
  respond: (created: NewProject) => StoredResponse,
): Promise<Creation> {
  const { workspaceId } = request;
  // A token acts in its own workspace only; naming another one is as if it did not exist.
  if (input.workspaceId !== undefined && input.workspaceId !== workspaceId)
    throw notFound("workspace", input.workspaceId);
  const region = resolveRegion(deps, input.region, undefined);
  try {
    return await createOnce(deps, request, async (client) => {
      if (input.logicalId !== undefined) {
        const { rows } = await client.query<{ id: string }>(
          "SELECT id FROM projects WHERE workspace_id = $1 AND logical_id = $2 AND deleted_at IS NULL",
          [workspaceId, input.logicalId],
        );
        if (rows[0])
          throw conflict(
            `cannot create project: logicalId "${input.logicalId}" already used by project "${rows[0].id}"`,
            `existing project id: ${rows[0].id}`,
          );
      }
      const id = newId("project");
      await client.query(
        "INSERT INTO projects (id, workspace_id, name, default_region, logical_id) VALUES ($1, $2, $3, $4, $5)",
        [id, workspaceId, input.name ?? generatedName("project"), region, input.logicalId ?? null],
      );
      const project = (await getProject(client, workspaceId, id))!;
      const database =
        input.createDatabase === false
          ? null
          : await createDatabaseRows(deps, client, { project, name: project.name, region, isDefault: true });
      return respond({ project, database });
    });
  } catch (err) {
    return logicalIdConflict(deps, err, {
      table: "projects",
      scopeColumn: "workspace_id",
      scope: workspaceId,
      logicalId: input.logicalId,
    });
  }
}

/** A page of the workspace's live projects (order and cursor: docs/decisions.md#lists). */
export async function projectPage(
  deps: ServiceDeps,
  workspaceId: string,
  q: { cursor?: string | undefined; limit?: number | undefined; logicalId?: string | undefined },
) {
  const limit = q.limit ?? 100;
  return paginate(
    await listProjects(deps.pool, { workspaceId, cursor: decodeCursor(q.cursor), limit, logicalId: q.logicalId }),
    limit,
  );
}

/** The live project of the workspace, or 404. */
export async function readProject(deps: ServiceDeps, workspaceId: string, id: string): Promise<ProjectRow> {
  const project = await getProject(deps.pool, workspaceId, id);
  if (!project) throw notFound("project", id);
  return project;
}

/** Only an empty project can go: its databases hold data, and each is deleted on its own (409 otherwise); its branches go with it. */
export async function deleteProject(deps: ServiceDeps, workspaceId: string, id: string): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const project = await getProject(client, workspaceId, id, "update");
    if (!project) throw notFound("project", id);
    const { rows } = await client.query<{ n: string }>(
      "SELECT count(*) AS n FROM databases WHERE project_id = $1 AND deleted_at IS NULL",
      [id],
    );
    if (Number(rows[0]!.n) > 0)
      throw conflict(
        `cannot delete project "${id}": it still has ${rows[0]!.n} database(s)`,
        "delete its databases first",
      );
    await client.query("UPDATE projects SET deleted_at = now() WHERE id = $1", [id]);
    // Its branches go with it (soft-deleted too: no database is on them any more).
    await client.query(
      "UPDATE branches SET deleted_at = now(), updated_at = now() WHERE project_id = $1 AND deleted_at IS NULL",
      [id],
    );
  });
}
