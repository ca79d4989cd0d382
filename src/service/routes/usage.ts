import type { FastifyInstance } from "fastify";
import { UsageQuery } from "../../contract/index.ts";
import { regionPool, type ServiceDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { parseWith, principalOf } from "../http.ts";
import { getDatabase } from "../store.ts";
import { databaseIdOf } from "./databases.ts";

const bytesPerGiB = 1024 ** 3;

// GET /v1/databases/{id}/usage in the public API's shape, read from the database's PostgreSQL server at request time
// (PUBLIC-API.md says what each number means here). A database that does not exist on its server yet reads as 0.
export function usageRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/usage", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(UsageQuery, req.query, "query");
    const db = await getDatabase(deps.pool, principalOf(req).workspaceId, id);
    if (!db) throw notFound("database", id);
    const now = new Date();
    const start = q.startDate ?? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    const end = q.endDate ?? now.toISOString();
    const { rows } = await regionPool(deps, db.region).query<{ bytes: string; transactions: string; sessions: string }>(
      `SELECT pg_database_size(d.oid) AS bytes,
              coalesce(s.xact_commit + s.xact_rollback, 0) AS transactions,
              (SELECT count(*) FROM pg_stat_activity a WHERE a.datid = d.oid AND a.backend_type = 'client backend') AS sessions
       FROM pg_database d LEFT JOIN pg_stat_database s ON s.datid = d.oid WHERE d.datname = $1`,
      [db.pg_name],
    );
    const row = rows[0];
    return {
      period: { start: new Date(start).toISOString(), end: new Date(end).toISOString() },
      metrics: {
        operations: { used: Number(row?.transactions ?? 0), unit: "ops" as const },
        storage: { used: Number(row?.bytes ?? 0) / bytesPerGiB, unit: "GiB" as const },
        // Ours: open sessions on the database now.
        connections: { used: Number(row?.sessions ?? 0), unit: "connections" as const },
      },
      generatedAt: now.toISOString(),
    };
  });
}
