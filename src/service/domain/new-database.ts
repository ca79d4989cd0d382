import { randomBytes } from "node:crypto";
import type pg from "pg";
import { newId, type SourceBody } from "../../contract/index.ts";
import { randomPassword, scramVerifier } from "../shared/crypto.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { conflict } from "../shared/errors.ts";
import { enqueueJob } from "../queue/jobs.ts";
import type { ConnectionRow, DatabaseRow, ProjectRow } from "../store/rows.ts";
import { newPgName, ownerRoleOf } from "../placement/pg-names.ts";
import { getDatabase } from "../store/queries.ts";
import { placeDatabase } from "../placement/servers.ts";
import { resolveRegion } from "./regions.ts";
import { checkFailureBudget } from "./job-budget.ts";
import { checkBackupSource, checkCloneSource } from "./sources.ts";

// The rows of a new database, shared by both database creations and by a project's default database. Only rows and
// a job: the provision job makes the PostgreSQL database and roles (jobs/handlers.ts), so a create answers at once.

/** A new database's row and first connection; the password exists only here and in the creation's response. */
export type NewDatabase = { row: DatabaseRow; connection: ConnectionRow; password: string };

export function generatedName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

// Any fixed number (with the workspace's hash): serialises one workspace's database creations from the count to commit.
const quotaLock = 7_221_024;

/**
 * A workspace's databases are capped (`databasesPerWorkspace`): each has a daily backup that is never refused and a
 * first connection that is never refused, so without a cap neither would be bounded. Under a transaction lock per
 * workspace, taken last of the checks (creations of one workspace wait for each other only from here to commit).
 */
async function checkDatabaseQuota(client: pg.PoolClient, limit: number, workspaceId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [quotaLock, workspaceId]);
  const { rows } = await client.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM databases WHERE workspace_id = $1 AND deleted_at IS NULL",
    [workspaceId],
  );
  if (rows[0]!.n >= limit) {
    throw conflict(
      `cannot create a database: this workspace has ${rows[0]!.n} live databases, its limit is ${limit}`,
      "delete a database you no longer use (DELETE /v1/databases/{id}), or ask the service's operator to raise databasesPerWorkspace",
    );
  }
}

/** Creates the rows of a new database and its first connection, and enqueues its provisioning; runs in the caller's transaction. */
export async function createDatabaseRows(
  deps: ServiceDeps,
  client: pg.PoolClient,
  input: {
    project: ProjectRow;
    name?: string | undefined;
    region?: string | undefined;
    isDefault: boolean;
    source?: SourceBody | undefined;
    logicalId?: string | undefined;
    branchId?: string | null | undefined;
  },
): Promise<NewDatabase> {
  const { project } = input;
  const region = resolveRegion(deps, input.region, project.default_region);
  if (input.logicalId !== undefined) {
    const { rows } = await client.query<{ id: string }>(
      // Unique within the database's branch (databases on no branch share their project's scope).
      "SELECT id FROM databases WHERE project_id = $1 AND branch_id IS NOT DISTINCT FROM $3 AND logical_id = $2 AND deleted_at IS NULL",
      [project.id, input.logicalId, input.branchId ?? null],
    );
    if (rows[0])
      throw conflict(
        `cannot create database: logicalId "${input.logicalId}" already used by database "${rows[0].id}"`,
        `existing database id: ${rows[0].id}`,
      );
  }
  const source = input.source ?? { type: "empty" as const };
  if (source.type === "backup") await checkBackupSource(client, project.workspace_id, source);
  if (source.type === "database") await checkCloneSource(client, project.workspace_id, source);
  if (source.type !== "empty")
    await checkFailureBudget(client, deps.config, project.workspace_id, "create a database from a source");
  if (input.isDefault)
    await client.query(
      "UPDATE databases SET is_default = false WHERE project_id = $1 AND is_default AND deleted_at IS NULL",
      [project.id],
    );
  const id = newId("database");
  // Last of the checks: a placement may make the region's creations wait for each other until this one commits.
  const server = await placeDatabase(deps, client, region, id);
  // Random, never of the id: every tenant can read the catalog (placement/pg-names.ts).
  const pgName = newPgName();
  const name = input.name ?? generatedName("database");
  const connectionId = newId("connection");
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  await checkDatabaseQuota(client, deps.config.databasesPerWorkspace, project.workspace_id);
  await client.query(
    `INSERT INTO databases (id, project_id, workspace_id, name, region, server, status, is_default, pg_name, owner_role, source, logical_id, default_connection_id, branch_id)
     VALUES ($1, $2, $3, $4, $5, $6, 'provisioning', $7, $8, $9, $10, $11, $12, $13)`,
    [
      id,
      project.id,
      project.workspace_id,
      name,
      region,
      server.name,
      input.isDefault,
      pgName,
      ownerRoleOf(pgName),
      JSON.stringify(source),
      input.logicalId ?? null,
      connectionId,
      input.branchId ?? null,
    ],
  );
  const { rows: conns } = await client.query<ConnectionRow>(
    `INSERT INTO connections (id, database_id, name, role_name, verifier) VALUES ($1, $2, $3, $4, $5)
     RETURNING id, database_id, name, role_name, created_at`,
    [connectionId, id, "default", newPgName(), verifier],
  );
  await enqueueJob(client, { kind: "provision", targetId: id });
  const row = await getDatabase(client, project.workspace_id, id);
  return { row: row!, connection: conns[0]!, password };
}
