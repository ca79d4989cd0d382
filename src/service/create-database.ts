import { randomBytes } from "node:crypto";
import type pg from "pg";
import { newId, type Region, type SourceBody } from "../contract/index.ts";
import { checkCloneSource } from "./clone.ts";
import { enabledRegions } from "./config.ts";
import { randomPassword, scramVerifier } from "./crypto.ts";
import type { ServiceDeps } from "./deps.ts";
import { conflict, notFound, ServiceError, unprocessable } from "./errors.ts";
import { enqueueJob } from "./jobs.ts";
import type { ConnectionRow, DatabaseRow, ProjectRow } from "./rows.ts";
import { getBackup, getDatabase } from "./store.ts";

export type NewDatabase = { row: DatabaseRow; connection: ConnectionRow; password: string };

const idBody = (id: string) => id.slice(id.indexOf("_") + 1);

export function generatedName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

export function resolveRegion(deps: ServiceDeps, wanted: string | undefined, fallback: string | undefined): Region {
  const region = (wanted === undefined || wanted === "inherit" ? fallback : wanted) ?? enabledRegions(deps.config)[0];
  if (!region || !deps.regionPools.has(region as Region)) {
    throw new ServiceError("region_unavailable", `region "${region}" is not available on this service`, `available regions: ${enabledRegions(deps.config).join(", ")}`);
  }
  return region as Region;
}

/** Inserts a login role's connection row; the password exists only in memory and in the caller's response. */
export async function insertConnection(client: pg.PoolClient, databaseId: string, name: string): Promise<{ connection: ConnectionRow; password: string; verifier: string }> {
  const id = newId("connection");
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  const { rows } = await client.query<ConnectionRow>(
    `INSERT INTO connections (id, database_id, name, role_name, verifier) VALUES ($1, $2, $3, $4, $5)
     RETURNING id, database_id, name, role_name, created_at`,
    [id, databaseId, name, `mds_${idBody(id)}`, verifier],
  );
  return { connection: rows[0]!, password, verifier };
}

/** Validates a `source: backup` against the caller's workspace: 404 for an unknown database, 422 for an unusable backup. */
export async function checkBackupSource(client: pg.PoolClient, workspaceId: string, source: { databaseId: string; backupId: string }): Promise<void> {
  const sourceDb = await getDatabase(client, workspaceId, source.databaseId);
  if (!sourceDb) throw notFound("database", source.databaseId);
  const backup = await getBackup(client, source.backupId);
  // Another database's backup (perhaps another workspace's) answers exactly as one that never existed: no oracle.
  if (!backup || backup.database_id !== source.databaseId) throw notFound("backup", source.backupId);
  if (backup.status !== "completed") throw unprocessable(`backup "${source.backupId}" is ${backup.status}, not completed`, "wait until the backup is completed");
}

/** Creates the rows of a new database and its first connection, and enqueues its provisioning; runs in the caller's transaction. */
export async function createDatabaseRows(
  deps: ServiceDeps,
  client: pg.PoolClient,
  input: { project: ProjectRow; name?: string | undefined; region?: string | undefined; isDefault: boolean; source?: SourceBody | undefined; logicalId?: string | undefined },
): Promise<NewDatabase> {
  const { project } = input;
  const region = resolveRegion(deps, input.region, project.default_region);
  if (input.logicalId !== undefined) {
    const { rows } = await client.query<{ id: string }>(
      "SELECT id FROM databases WHERE project_id = $1 AND logical_id = $2 AND deleted_at IS NULL",
      [project.id, input.logicalId],
    );
    if (rows[0]) throw conflict(`cannot create database: logicalId "${input.logicalId}" already used by database "${rows[0].id}"`, `existing database id: ${rows[0].id}`);
  }
  const source = input.source ?? { type: "empty" as const };
  if (source.type === "backup") await checkBackupSource(client, project.workspace_id, source);
  if (source.type === "database") await checkCloneSource(client, project.workspace_id, source);
  if (input.isDefault) await client.query("UPDATE databases SET is_default = false WHERE project_id = $1 AND is_default AND deleted_at IS NULL", [project.id]);
  const id = newId("database");
  const pgName = `mds_${idBody(id)}`;
  const name = input.name ?? generatedName("database");
  const connectionId = newId("connection");
  await client.query(
    `INSERT INTO databases (id, project_id, workspace_id, name, region, status, is_default, pg_name, owner_role, source, logical_id, default_connection_id)
     VALUES ($1, $2, $3, $4, $5, 'provisioning', $6, $7, $8, $9, $10, $11)`,
    [id, project.id, project.workspace_id, name, region, input.isDefault, pgName, `${pgName}_owner`, JSON.stringify(source), input.logicalId ?? null, connectionId],
  );
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  const { rows: conns } = await client.query<ConnectionRow>(
    `INSERT INTO connections (id, database_id, name, role_name, verifier) VALUES ($1, $2, $3, $4, $5)
     RETURNING id, database_id, name, role_name, created_at`,
    [connectionId, id, "default", `mds_${idBody(connectionId)}`, verifier],
  );
  await enqueueJob(client, { kind: "provision", targetId: id });
  const row = await getDatabase(client, project.workspace_id, id);
  return { row: row!, connection: conns[0]!, password };
}

/** Turns a unique violation on logicalId (a concurrent create won the race) into the contract's 409. */
export async function logicalIdConflict(
  deps: ServiceDeps,
  err: unknown,
  lookup: { table: "projects" | "databases"; scopeColumn: string; scope: string; logicalId?: string | undefined },
  action: "create" | "update" = "create",
): Promise<never> {
  const e = err as { code?: string; constraint?: string };
  if (e.code === "23505" && lookup.logicalId !== undefined && (e.constraint === "projects_logical_id" || e.constraint === "databases_logical_id")) {
    const { rows } = await deps.pool.query<{ id: string }>(
      `SELECT id FROM ${lookup.table} WHERE ${lookup.scopeColumn} = $1 AND logical_id = $2 AND deleted_at IS NULL`,
      [lookup.scope, lookup.logicalId],
    );
    const existing = rows[0]?.id ?? "unknown";
    throw conflict(`cannot ${action} ${lookup.table === "projects" ? "project" : "database"}: logicalId "${lookup.logicalId}" already used by "${existing}"`, `existing id: ${existing}`);
  }
  throw err;
}
