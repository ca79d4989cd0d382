import type pg from "pg";
import type { SourceBody } from "../../contract/index.ts";
import { serverPool, type ServiceDeps } from "../runtime/deps.ts";
import { conflict, notFound } from "../shared/errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { enqueueJob } from "../queue/jobs.ts";
import { decodeCursor, paginate } from "../store/pagination.ts";
import { revokeLoginRole } from "../placement/provisioner.ts";
import type { ConnectionRow, DatabaseRow } from "../store/rows.ts";
import { connectionsOf, getDatabase, getProject, listDatabases } from "../store/queries.ts";
import { inTransaction } from "../store/pool.ts";
import { branchForDatabase, checkBranchFilter } from "./branches.ts";
import { logicalIdConflict } from "./logical-id.ts";
import { createDatabaseRows, type NewDatabase } from "./new-database.ts";

/** A database as the API shows it: with its live connections, oldest first. */
export type DatabaseView = { db: DatabaseRow; connections: ConnectionRow[] };

/**
 * Both database creations (POST /v1/databases and POST /v1/projects/{id}/databases), in one transaction with the
 * Idempotency-Key record. `respond` renders what was made: that rendering is what a replay returns.
 */
export async function createProjectDatabase(
  deps: ServiceDeps,
  request: CreationRequest,
  projectId: string,
  input: NewDatabaseInput,
  respond: (created: NewDatabase) => StoredResponse,
): Promise<Creation> {
  let branchId: string | null = null;
  try {
    return await createOnce(deps, request, async (client) => {
      // Creates wait for each other only when they move the default flag (exactly one default per project).
      const project = await getProject(client, request.workspaceId, projectId, input.isDefault ? "update" : "share");
      if (!project) throw notFound("project", projectId);
      branchId = await branchForDatabase(client, deps.config, project, input);
      return respond(
        await createDatabaseRows(deps, client, {
          project,
          name: input.name,
          region: input.region,
          isDefault: input.isDefault ?? false,
          source: input.source,
          logicalId: input.logicalId,
          branchId,
        }),
      );
    });
  } catch (err) {
    return logicalIdConflict(deps, err, {
      table: "databases",
      scopeColumn: "project_id",
      scope: projectId,
      logicalId: input.logicalId,
      branchId,
    });
  }
}

type NewDatabaseInput = {
  name?: string | undefined;
  region?: string | undefined;
  isDefault?: boolean | undefined;
  source?: SourceBody | undefined;
  logicalId?: string | undefined;
  /** Only on POST /v1/databases (as in the public API); neither: the project's default branch, if it has one. */
  branchId?: string | undefined;
  branchGitName?: string | undefined;
};

type DatabaseQuery = {
  cursor?: string | undefined;
  limit?: number | undefined;
  projectId?: string | undefined;
  logicalId?: string | undefined;
  branchId?: string | undefined;
  branchGitName?: string | undefined;
};

/**
 * A page of the workspace's live databases (order and cursor: docs/decisions.md#lists); an unknown or foreign `projectId`,
 * `branchId` or `branchGitName` filters everything out.
 */
export async function databasePage(deps: ServiceDeps, workspaceId: string, q: DatabaseQuery) {
  checkBranchFilter(q);
  const limit = q.limit ?? 100;
  const rows = await listDatabases(deps.pool, {
    workspaceId,
    projectId: q.projectId,
    logicalId: q.logicalId,
    branchId: q.branchId,
    branchGitName: q.branchGitName,
    cursor: decodeCursor(q.cursor),
    limit,
  });
  const { items, pagination } = paginate(rows, limit);
  const connections = await connectionsOf(
    deps.pool,
    items.map((d) => d.id),
  );
  return { items: items.map((db): DatabaseView => ({ db, connections: connections.get(db.id) ?? [] })), pagination };
}

/** GET /v1/projects/{id}/databases: unlike the `projectId` filter, an unknown project is 404. */
export async function projectDatabasePage(
  deps: ServiceDeps,
  workspaceId: string,
  projectId: string,
  q: Omit<DatabaseQuery, "projectId">,
) {
  const project = await getProject(deps.pool, workspaceId, projectId);
  if (!project) throw notFound("project", projectId);
  return databasePage(deps, workspaceId, { ...q, projectId });
}

/** The live database of the workspace, or 404. */
export async function readDatabase(deps: ServiceDeps, workspaceId: string, id: string): Promise<DatabaseView> {
  const db = await getDatabase(deps.pool, workspaceId, id);
  if (!db) throw notFound("database", id);
  const connections = await connectionsOf(deps.pool, [id]);
  return { db, connections: connections.get(id) ?? [] };
}

/**
 * PATCH: name, logicalId (unique within the database's branch, 409 naming the holder), the branch (`branchId` or
 * `branchGitName`, created when missing; 409 when the database's logicalId is taken on the target branch) and
 * `isDefault: true` (moves the flag).
 */
export async function updateDatabase(
  deps: ServiceDeps,
  workspaceId: string,
  id: string,
  input: {
    name?: string | undefined;
    logicalId?: string | undefined;
    isDefault?: true | undefined;
    branchId?: string | undefined;
    branchGitName?: string | undefined;
  },
): Promise<DatabaseView> {
  // For the 409 of a race lost at the unique index: the logicalId and branch the failed write was about.
  let projectId: string | undefined;
  let branchId: string | null = null;
  let logicalId = input.logicalId;
  try {
    await inTransaction(deps.pool, async (client) => {
      const found = await getDatabase(client, workspaceId, id);
      if (!found) throw notFound("database", id);
      projectId = found.project_id;
      branchId = found.branch_id;
      // Project, then branches, then the database: the order creates take, so none of them deadlocks with another.
      const project = await getProject(
        client,
        workspaceId,
        found.project_id,
        input.isDefault === true ? "update" : "share",
      );
      if (!project) throw notFound("database", id);
      const moves = input.branchId !== undefined || input.branchGitName !== undefined;
      const target = moves ? await branchForDatabase(client, deps.config, project, input) : undefined;
      const db = await getDatabase(client, workspaceId, id, true);
      if (!db) throw notFound("database", id);
      branchId = db.branch_id;
      if (input.name !== undefined)
        await client.query("UPDATE databases SET name = $2 WHERE id = $1", [id, input.name]);
      if (target !== undefined && target !== db.branch_id) {
        if (db.logical_id !== null) {
          const holder = await logicalIdHolder(client, db.project_id, target, db.logical_id);
          if (holder)
            throw conflict(
              `cannot move database: its logicalId "${db.logical_id}" is already used on branch "${target}" by database "${holder}"`,
              `existing database id: ${holder}`,
            );
        }
        [branchId, logicalId] = [target, db.logical_id ?? undefined];
        await client.query("UPDATE databases SET branch_id = $2 WHERE id = $1", [id, target]);
      }
      if (input.logicalId !== undefined && input.logicalId !== db.logical_id) {
        const holder = await logicalIdHolder(client, db.project_id, db.branch_id, input.logicalId);
        if (holder)
          throw conflict(
            `cannot update database: logicalId "${input.logicalId}" already used by database "${holder}"`,
            `existing database id: ${holder}`,
          );
        await client.query("UPDATE databases SET logical_id = $2 WHERE id = $1", [id, input.logicalId]);
      }
      if (input.isDefault === true && !db.is_default) {
        await client.query(
          "UPDATE databases SET is_default = false WHERE project_id = $1 AND is_default AND deleted_at IS NULL",
          [db.project_id],
        );
        await client.query("UPDATE databases SET is_default = true WHERE id = $1", [id]);
      }
    });
  } catch (err) {
    return logicalIdConflict(
      deps,
      err,
      { table: "databases", scopeColumn: "project_id", scope: projectId ?? "", logicalId, branchId },
      "update",
    );
  }
  return readDatabase(deps, workspaceId, id);
}

/** The live database of the project's branch (or of its databases on no branch) holding that logicalId. */
async function logicalIdHolder(
  client: pg.PoolClient,
  projectId: string,
  branchId: string | null,
  logicalId: string,
): Promise<string | undefined> {
  const { rows } = await client.query<{ id: string }>(
    "SELECT id FROM databases WHERE project_id = $1 AND branch_id IS NOT DISTINCT FROM $2 AND logical_id = $3 AND deleted_at IS NULL",
    [projectId, branchId, logicalId],
  );
  return rows[0]?.id;
}

/**
 * Hides the database and revokes its connections at once: its logins can no longer log in and none of their sessions
 * remain when this returns (as a connection's revocation). A `drop` job removes the PostgreSQL database, its roles and
 * its backups later, maybe much later (it waits behind the database's other jobs); until then a revoked login left
 * LOGIN would hold sessions that no limit counts and no quota charges. A project's default database goes only when
 * it is the project's last.
 */
export async function deleteDatabase(deps: ServiceDeps, workspaceId: string, id: string): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const db = await getDatabase(client, workspaceId, id, true);
    if (!db) throw notFound("database", id);
    if (db.is_default) {
      const { rows } = await client.query<{ n: string }>(
        "SELECT count(*) AS n FROM databases WHERE project_id = $1 AND id <> $2 AND deleted_at IS NULL",
        [db.project_id, id],
      );
      if (Number(rows[0]!.n) > 0)
        throw conflict(
          `cannot delete database "${id}": it is the project's default database and the project has other databases`,
          "make another database the default first (PATCH isDefault: true)",
        );
    }
    await client.query("UPDATE databases SET deleted_at = now(), is_default = false WHERE id = $1", [id]);
    const { rows: logins } = await client.query<{ role_name: string }>(
      "UPDATE connections SET revoked_at = coalesce(revoked_at, now()) WHERE database_id = $1 AND revoked_at IS NULL RETURNING role_name",
      [id],
    );
    await enqueueJob(client, { kind: "drop", targetId: id });
    // Under the database's row lock, like a revocation: a provision job running now revokes them again when it ends.
    const pool = serverPool(deps, db);
    for (const { role_name } of logins) {
      // A server out of reach must not make the database undeletable: the tenant guard ends any session of a revoked
      // login it finds (and shuts the login), and the drop job drops them.
      await revokeLoginRole(pool, role_name).catch((err: Error) =>
        deps.logger.warn(
          { database: id, err: { message: err.message } },
          "cannot revoke a deleted database's login yet; the tenant guard and the drop job will",
        ),
      );
    }
  });
  deps.wakeJobs();
}
