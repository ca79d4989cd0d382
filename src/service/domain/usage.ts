import { serverPool, type ServiceDeps } from "../runtime/deps.ts";
import { notFound } from "../shared/errors.ts";
import { getDatabase } from "../store/queries.ts";

type Usage = {
  start: Date;
  end: Date;
  generatedAt: Date;
  bytes: number;
  transactions: number;
  sessions: number;
};

/**
 * GET /v1/databases/{id}/usage, read from the database's PostgreSQL server at request time (PUBLIC-API.md says what
 * each number means here). The period defaults to the current month so far. A database that does not exist on its
 * server yet reads as 0.
 */
export async function measureUsage(
  deps: ServiceDeps,
  workspaceId: string,
  id: string,
  period: { startDate?: string | undefined; endDate?: string | undefined },
): Promise<Usage> {
  const db = await getDatabase(deps.pool, workspaceId, id);
  if (!db) throw notFound("database", id);
  const now = new Date();
  const start = period.startDate ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
  const end = period.endDate ?? now.toISOString();
  const { rows } = await serverPool(deps, db).query<{ bytes: string; transactions: string; sessions: string }>(
    `SELECT pg_database_size(d.oid) AS bytes,
            coalesce(s.xact_commit + s.xact_rollback, 0) AS transactions,
            (SELECT count(*) FROM pg_stat_activity a WHERE a.datid = d.oid AND a.backend_type = 'client backend') AS sessions
     FROM pg_database d LEFT JOIN pg_stat_database s ON s.datid = d.oid WHERE d.datname = $1`,
    [db.pg_name],
  );
  const row = rows[0];
  return {
    start: new Date(start),
    end: new Date(end),
    generatedAt: now,
    bytes: Number(row?.bytes ?? 0),
    transactions: Number(row?.transactions ?? 0),
    sessions: Number(row?.sessions ?? 0),
  };
}
