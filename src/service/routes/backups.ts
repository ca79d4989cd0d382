import type { FastifyInstance } from "fastify";
import { BackupId, backupIdPattern, ListBackupsQuery } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { backupPage, deleteBackup, takeBackup } from "../domain/backups.ts";
import {
  creationRequest,
  databaseIdOf,
  jsonBody,
  parseWith,
  pathId,
  principalOf,
  sendCreation,
} from "../http/request.ts";
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

  // Our service's extension (the public API has no such endpoint): BackupSchedule's retention deletes with it.
  app.delete("/v1/databases/:databaseId/backups/:backupId", async (req, reply) => {
    const params = req.params as { databaseId?: string; backupId?: string };
    const id = databaseIdOf(params.databaseId);
    const backupId = pathId(BackupId, params.backupId, "backup id", backupIdPattern);
    await deleteBackup(deps, principalOf(req).workspaceId, id, backupId);
    return reply.code(204).send();
  });
}
