import type { FastifyInstance } from "fastify";
import { UsageQuery } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { measureUsage } from "../domain/usage.ts";
import { databaseIdOf, parseWith, principalOf } from "../http/request.ts";

const bytesPerGiB = 1024 ** 3;

// GET /v1/databases/{id}/usage in the public API's shape.
export function usageRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/usage", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(UsageQuery, req.query, "query");
    const usage = await measureUsage(deps, principalOf(req).workspaceId, id, q);
    return {
      period: { start: usage.start.toISOString(), end: usage.end.toISOString() },
      metrics: {
        operations: { used: usage.transactions, unit: "ops" as const },
        storage: { used: usage.bytes / bytesPerGiB, unit: "GiB" as const },
        // Ours: open sessions on the database now.
        connections: { used: usage.sessions, unit: "connections" as const },
      },
      generatedAt: usage.generatedAt.toISOString(),
    };
  });
}
