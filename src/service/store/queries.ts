import type pg from "pg";
import { cursorTs, type Cursor } from "./pagination.ts";
import type { BackupRow, BranchRow, ConnectionRow, DatabaseRow, ProjectRow } from "./rows.ts";

// Queries of the control database. Every lookup is scoped by workspace: another workspace's object is simply absent.

type Db = Pick<pg.Pool, "query">;

const projectColumns = `p.id, p.workspace_id, w.name AS workspace_name, p.name, p.default_region, p.logical_id, p.created_at, ${cursorTs("p.created_at")} AS cursor_ts`;
const databaseColumns = `d.id, d.project_id, p.name AS project_name, d.workspace_id, d.name, d.region, d.server, d.status, d.is_default, d.pg_name,
  d.owner_role, d.source, d.logical_id, d.branch_id, d.default_connection_id, d.created_at, ${cursorTs("d.created_at")} AS cursor_ts`;

/** `lock`: "update" to change or delete the project, "share" to add databases to it (creates do not wait for each other). */
export async function getProject(
  db: Db,
  workspaceId: string,
  id: string,
  lock: false | "update" | "share" = false,
): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${projectColumns} FROM projects p JOIN workspaces w ON w.id = p.workspace_id
     WHERE p.id = $1 AND p.workspace_id = $2 AND p.deleted_at IS NULL ${lock === "update" ? "FOR UPDATE OF p" : lock === "share" ? "FOR KEY SHARE OF p" : ""}`,
    [id, workspaceId],
  );
  return rows[0];
}

export async function listProjects(
  db: Db,
  q: { workspaceId: string; cursor?: Cursor | undefined; limit: number; logicalId?: string | undefined },
) {
  const { rows } = await db.query<ProjectRow & { cursor_ts: string }>(
    `SELECT ${projectColumns} FROM projects p JOIN workspaces w ON w.id = p.workspace_id
     WHERE p.workspace_id = $1 AND p.deleted_at IS NULL
       AND ($2::text IS NULL OR p.logical_id = $2)
       AND ($3::timestamptz IS NULL OR (p.created_at, p.id) > ($3::timestamptz, $4::text))
     ORDER BY p.created_at, p.id LIMIT $5`,
    [q.workspaceId, q.logicalId ?? null, q.cursor?.ts ?? null, q.cursor?.id ?? null, q.limit + 1],
  );
  return rows;
}

export async function getDatabase(
  db: Db,
  workspaceId: string,
  id: string,
  lock = false,
): Promise<DatabaseRow | undefined> {
  const { rows } = await db.query<DatabaseRow>(
    `SELECT ${databaseColumns} FROM databases d JOIN projects p ON p.id = d.project_id
     WHERE d.id = $1 AND d.workspace_id = $2 AND d.deleted_at IS NULL ${lock ? "FOR UPDATE OF d" : ""}`,
    [id, workspaceId],
  );
  return rows[0];
}

/** For jobs: the row even if deleted. */
export async function getDatabaseById(
  db: Db,
  id: string,
): Promise<(DatabaseRow & { deleted_at: Date | null }) | undefined> {
  const { rows } = await db.query<DatabaseRow & { deleted_at: Date | null }>(
    `SELECT ${databaseColumns}, d.deleted_at FROM databases d JOIN projects p ON p.id = d.project_id WHERE d.id = $1`,
    [id],
  );
  return rows[0];
}

/**
 * `branchId`: a branch's id, or "unassigned" for databases on no branch; `branchGitName`: databases on the
 * workspace's live branches of that git name (one per project).
 */
export async function listDatabases(
  db: Db,
  q: {
    workspaceId: string;
    projectId?: string | undefined;
    logicalId?: string | undefined;
    branchId?: string | undefined;
    branchGitName?: string | undefined;
    cursor?: Cursor | undefined;
    limit: number;
  },
) {
  const { rows } = await db.query<DatabaseRow & { cursor_ts: string }>(
    `SELECT ${databaseColumns} FROM databases d JOIN projects p ON p.id = d.project_id
     WHERE d.workspace_id = $1 AND d.deleted_at IS NULL
       AND ($2::text IS NULL OR d.project_id = $2)
       AND ($3::text IS NULL OR d.logical_id = $3)
       AND ($4::timestamptz IS NULL OR (d.created_at, d.id) > ($4::timestamptz, $5::text))
       AND ($7::text IS NULL OR ($7 = 'unassigned' AND d.branch_id IS NULL) OR d.branch_id = $7)
       AND ($8::text IS NULL OR d.branch_id IN (SELECT b.id FROM branches b WHERE b.workspace_id = $1 AND b.git_name = $8 AND b.deleted_at IS NULL))
     ORDER BY d.created_at, d.id LIMIT $6`,
    [
      q.workspaceId,
      q.projectId ?? null,
      q.logicalId ?? null,
      q.cursor?.ts ?? null,
      q.cursor?.id ?? null,
      q.limit + 1,
      q.branchId ?? null,
      q.branchGitName ?? null,
    ],
  );
  return rows;
}

const branchColumns = `b.id, b.project_id, p.name AS project_name, b.workspace_id, b.git_name, b.is_default, b.role, b.created_at, b.updated_at,
  ${cursorTs("b.created_at")} AS cursor_ts`;
const branchFrom = "branches b JOIN projects p ON p.id = b.project_id AND p.deleted_at IS NULL";
/** "share" (FOR KEY SHARE): a database is being put on it, so a concurrent delete waits; "update": to delete it. */
type BranchLock = false | "share" | "update";
const branchLockClause = (lock: BranchLock) =>
  lock === "update" ? "FOR UPDATE OF b" : lock === "share" ? "FOR KEY SHARE OF b" : "";

export async function getBranch(
  db: Db,
  workspaceId: string,
  id: string,
  lock: BranchLock = false,
): Promise<BranchRow | undefined> {
  const { rows } = await db.query<BranchRow>(
    `SELECT ${branchColumns} FROM ${branchFrom} WHERE b.id = $1 AND b.workspace_id = $2 AND b.deleted_at IS NULL ${branchLockClause(lock)}`,
    [id, workspaceId],
  );
  return rows[0];
}

/** The project's live branch of that git name, or its default branch. */
export async function findBranch(
  db: Db,
  projectId: string,
  by: { gitName: string } | "default",
  lock: BranchLock = false,
): Promise<BranchRow | undefined> {
  const { rows } = await db.query<BranchRow>(
    by === "default"
      ? `SELECT ${branchColumns} FROM ${branchFrom} WHERE b.project_id = $1 AND b.deleted_at IS NULL AND b.is_default ${branchLockClause(lock)}`
      : `SELECT ${branchColumns} FROM ${branchFrom} WHERE b.project_id = $1 AND b.deleted_at IS NULL AND b.git_name = $2 ${branchLockClause(lock)}`,
    by === "default" ? [projectId] : [projectId, by.gitName],
  );
  return rows[0];
}

export async function listBranches(
  db: Db,
  q: {
    projectId: string;
    gitName?: string | undefined;
    gitNameContains?: string | undefined;
    cursor?: Cursor | undefined;
    limit: number;
  },
) {
  const { rows } = await db.query<BranchRow & { cursor_ts: string }>(
    `SELECT ${branchColumns} FROM ${branchFrom}
     WHERE b.project_id = $1 AND b.deleted_at IS NULL
       AND ($2::text IS NULL OR b.git_name = $2)
       AND ($3::text IS NULL OR strpos(b.git_name, $3) > 0)
       AND ($4::timestamptz IS NULL OR (b.created_at, b.id) > ($4::timestamptz, $5::text))
     ORDER BY b.created_at, b.id LIMIT $6`,
    [
      q.projectId,
      q.gitName ?? null,
      q.gitNameContains ?? null,
      q.cursor?.ts ?? null,
      q.cursor?.id ?? null,
      q.limit + 1,
    ],
  );
  return rows;
}

/** Live connections of the given databases, oldest first, grouped by database id. */
export async function connectionsOf(db: Db, databaseIds: string[]): Promise<Map<string, ConnectionRow[]>> {
  const out = new Map<string, ConnectionRow[]>();
  if (databaseIds.length === 0) return out;
  const { rows } = await db.query<ConnectionRow>(
    `SELECT id, database_id, name, role_name, created_at FROM connections
     WHERE database_id = ANY($1) AND revoked_at IS NULL ORDER BY created_at, id`,
    [databaseIds],
  );
  for (const r of rows) {
    const list = out.get(r.database_id) ?? [];
    list.push(r);
    out.set(r.database_id, list);
  }
  return out;
}

/** Live connections of the workspace's live databases, all of them or one database's. */
export async function listConnections(
  db: Db,
  q: { workspaceId: string; databaseId?: string | undefined; cursor?: Cursor | undefined; limit: number },
) {
  const { rows } = await db.query<ConnectionRow & { cursor_ts: string }>(
    `SELECT c.id, c.database_id, c.name, c.role_name, c.created_at, ${cursorTs("c.created_at")} AS cursor_ts
     FROM connections c JOIN databases d ON d.id = c.database_id
     WHERE d.workspace_id = $1 AND d.deleted_at IS NULL AND c.revoked_at IS NULL
       AND ($2::text IS NULL OR c.database_id = $2)
       AND ($3::timestamptz IS NULL OR (c.created_at, c.id) > ($3::timestamptz, $4::text))
     ORDER BY c.created_at, c.id LIMIT $5`,
    [q.workspaceId, q.databaseId ?? null, q.cursor?.ts ?? null, q.cursor?.id ?? null, q.limit + 1],
  );
  return rows;
}

/** The workspace's live databases among `ids`, by id. */
export async function databasesByIds(db: Db, workspaceId: string, ids: string[]): Promise<Map<string, DatabaseRow>> {
  const { rows } = await db.query<DatabaseRow>(
    `SELECT ${databaseColumns} FROM databases d JOIN projects p ON p.id = d.project_id
     WHERE d.id = ANY($1) AND d.workspace_id = $2 AND d.deleted_at IS NULL`,
    [ids, workspaceId],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

export async function getConnection(
  db: Db,
  workspaceId: string,
  id: string,
  lock = false,
): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<ConnectionRow>(
    `SELECT c.id, c.database_id, c.name, c.role_name, c.created_at FROM connections c JOIN databases d ON d.id = c.database_id
     WHERE c.id = $1 AND d.workspace_id = $2 AND c.revoked_at IS NULL AND d.deleted_at IS NULL ${lock ? "FOR UPDATE OF c" : ""}`,
    [id, workspaceId],
  );
  return rows[0];
}

export async function listBackups(db: Db, databaseId: string, limit: number): Promise<BackupRow[]> {
  const { rows } = await db.query<BackupRow>(
    `SELECT id, database_id, status, size, sha256, path, created_at FROM backups
     WHERE database_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT $2`,
    [databaseId, limit + 1],
  );
  return rows;
}

/**
 * A backup that is not deleted. `lock`: "share" while a restore or a clone from it is being created, "update" while it
 * is being deleted, so the two cannot pass each other (the DELETE then sees the restore's job, or the restore the
 * deletion).
 */
export async function getBackup(db: Db, id: string, lock?: "share" | "update"): Promise<BackupRow | undefined> {
  const { rows } = await db.query<BackupRow>(
    `SELECT id, database_id, status, size, sha256, path, data_bytes, created_at FROM backups WHERE id = $1 AND deleted_at IS NULL ${lock === "update" ? "FOR UPDATE" : lock === "share" ? "FOR SHARE" : ""}`,
    [id],
  );
  return rows[0];
}
