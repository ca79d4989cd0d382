import type { FastifyInstance } from "fastify";
import { ListBackupsQuery, newId } from "../../contract/index.ts";
import type { ServiceDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { idempotentPost, jsonBody, parseWith, principalOf } from "../http.ts";
import { enqueueJob } from "../jobs.ts";
import { renderBackup } from "../render.ts";
import type { BackupRow } from "../rows.ts";
import { getDatabase, listBackups } from "../store.ts";
import { databaseIdOf } from "./databases.ts";

export function backupRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/backups", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(ListBackupsQuery, req.query, "query");
    const limit = q.limit ?? 100;
    const db = await getDatabase(deps.pool, principalOf(req).workspaceId, id);
    if (!db) throw notFound("database", id);
    const rows = await listBackups(deps.pool, id, limit);
    return {
      data: rows.slice(0, limit).map(renderBackup),
      meta: { backupRetentionDays: deps.config.backupRetentionDays },
      pagination: { hasMore: rows.length > limit, limit },
    };
  });

  app.post("/v1/databases/:databaseId/backups", async (req, reply) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const raw = jsonBody(req);
    parseWith(ListBackupsQuery.pick({}), raw, "request body");
    const workspaceId = principalOf(req).workspaceId;
    return idempotentPost(deps, req, reply, raw, async (client) => {
      const db = await getDatabase(client, workspaceId, id, true);
      if (!db) throw notFound("database", id);
      const backup = await insertBackup(client, id, "manual");
      return { status: 201, body: { data: renderBackup(backup) } };
    });
  });
}

export async function insertBackup(client: Pick<import("pg").Pool, "query">, databaseId: string, trigger: "manual" | "daily"): Promise<BackupRow> {
  const id = newId("backup");
  const { rows } = await client.query<BackupRow>(
    "INSERT INTO backups (id, database_id, status, trigger) VALUES ($1, $2, 'running', $3) RETURNING id, database_id, status, size, sha256, path, created_at",
    [id, databaseId, trigger],
  );
  await enqueueJob(client, { kind: "backup", targetId: databaseId, payload: { backupId: id } });
  return rows[0]!;
}
