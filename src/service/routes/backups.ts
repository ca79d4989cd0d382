import type { FastifyInstance } from "fastify";
import { ListBackupsQuery } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { backupPage, takeBackup } from "../domain/backups.ts";
import { creationRequest, databaseIdOf, jsonBody, parseWith, principalOf, sendCreation } from "../http/request.ts";
import { renderBackup } from "../http/render.ts";

export function backupRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/backups", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(ListBackupsQuery, req.query, "query");
    const { items, hasMore, limit } = await backupPage(deps, principalOf(req).workspaceId, id, q);
    return {
      data: items.map(renderBackup),
      meta: { backupRetentionDays: deps.config.backupRetentionDays },
      pagination: { hasMore, limit },
    };
  });

  app.post("/v1/databases/:databaseId/backups", async (req, reply) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const raw = jsonBody(req);
    // No fields: an empty object (or no body) only.
    parseWith(ListBackupsQuery.pick({}), raw, "request body");
    const taken = await takeBackup(deps, creationRequest(req, raw), id, (backup) => ({
      status: 201,
      body: { data: renderBackup(backup) },
    }));
    return sendCreation(reply, taken);
  });
}
