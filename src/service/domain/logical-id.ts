import type { ServiceDeps } from "../runtime/deps.ts";
import { conflict } from "../shared/errors.ts";

// A logicalId is unique per workspace (projects) or per branch (databases; per project for databases on no branch). Creates and updates check it in their
// transaction; a concurrent one can still take it between the check and the write, and then the unique index says so.

/** Turns a unique violation on logicalId (a concurrent create won the race) into the contract's 409; rethrows anything else. */
export async function logicalIdConflict(
  deps: ServiceDeps,
  err: unknown,
  lookup: {
    table: "projects" | "databases";
    scopeColumn: string;
    scope: string;
    logicalId?: string | undefined;
    branchId?: string | null;
  },
  action: "create" | "update" = "create",
): Promise<never> {
  const e = err as { code?: string; constraint?: string };
  if (
    e.code === "23505" &&
    lookup.logicalId !== undefined &&
    (e.constraint === "projects_logical_id" || e.constraint === "databases_logical_id")
  ) {
    // On the pool, not the failed transaction's client: the winner committed, so a new statement sees it.
    const { rows } = await deps.pool.query<{ id: string }>(
      lookup.table === "databases"
        ? `SELECT id FROM databases WHERE ${lookup.scopeColumn} = $1 AND branch_id IS NOT DISTINCT FROM $3 AND logical_id = $2 AND deleted_at IS NULL`
        : `SELECT id FROM ${lookup.table} WHERE ${lookup.scopeColumn} = $1 AND logical_id = $2 AND deleted_at IS NULL`,
      lookup.table === "databases"
        ? [lookup.scope, lookup.logicalId, lookup.branchId ?? null]
        : [lookup.scope, lookup.logicalId],
    );
    const existing = rows[0]?.id ?? "unknown";
    throw conflict(
      `cannot ${action} ${lookup.table === "projects" ? "project" : "database"}: logicalId "${lookup.logicalId}" already used by "${existing}"`,
      `existing id: ${existing}`,
    );
  }
  throw err;
}
