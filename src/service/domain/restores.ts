import type { ServiceDeps } from "../runtime/deps.ts";
import { conflict, notFound } from "../shared/errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { enqueueJob } from "../queue/jobs.ts";
import { connectionsOf, getDatabase } from "../store/queries.ts";
import type { DatabaseView } from "./databases.ts";
import { checkFailureBudget } from "./job-budget.ts";
import { checkBackupSource } from "./sources.ts";

/**
 * POST /v1/databases/{id}/restore: sets `recovering` and queues a `restore` job (jobs/handlers.ts), which replaces the
 * data at once or not at all. A restore destroys data, so its Idempotency-Key is kept far longer than a creation's
 * and is recorded on the job. `respond` renders the database as it now is: that rendering is what a replay returns.
 */
export async function startRestore(
  deps: ServiceDeps,
  request: CreationRequest,
  id: string,
  source: { databaseId: string; backupId: string; type: "backup" },
  respond: (restoring: DatabaseView) => StoredResponse,
): Promise<Creation> {
  const { workspaceId, idempotencyKey } = request;
  return createOnce(
    deps,
    request,
    async (client) => {
      const db = await getDatabase(client, workspaceId, id, true);
      if (!db) throw notFound("database", id);
      await checkBackupSource(client, workspaceId, source);
      await checkFailureBudget(client, deps.config, workspaceId, "restore a database");
      if (db.status === "provisioning" || db.status === "recovering") {
        throw conflict(
          `cannot restore database "${id}": it is ${db.status}`,
          "wait until the database is ready or failed, then retry",
        );
      }
      await client.query("UPDATE databases SET status = 'recovering', source = $2 WHERE id = $1", [
        id,
        JSON.stringify(source),
      ]);
      await enqueueJob(client, {
        kind: "restore",
        targetId: id,
        payload: { backupId: source.backupId, sourceDatabaseId: source.databaseId },
        idempotencyKey: typeof idempotencyKey === "string" ? idempotencyKey : null,
      });
      const updated = (await getDatabase(client, workspaceId, id))!;
      const connections = await connectionsOf(client, [id]);
      return respond({ db: updated, connections: connections.get(id) ?? [] });
    },
    { restore: true },
  );
}
