import type { FastifyInstance } from "fastify";
import { CreateDatabaseBody, DatabaseId, databaseIdPattern, ListDatabasesQuery, RestoreBody, UpdateDatabaseBody } from "../../contract/index.ts";
import { checkBackupSource, logicalIdConflict } from "../create-database.ts";
import type { ServiceDeps } from "../deps.ts";
import { conflict, notFound } from "../errors.ts";
import { idempotentPost, jsonBody, parseWith, pathId, principalOf } from "../http.ts";
import { enqueueJob } from "../jobs.ts";
import { decodeCursor, paginate } from "../pagination.ts";
import { renderDatabase } from "../render.ts";
import { connectionsOf, getDatabase, listDatabases } from "../store.ts";
import { inTransaction } from "../store/pool.ts";
import { createInProject } from "./projects.ts";

export async function listDatabasesResponse(
  deps: ServiceDeps,
  workspaceId: string,
  q: { cursor?: string | undefined; limit?: number | undefined; projectId?: string | undefined; logicalId?: string | undefined },
) {
  const limit = q.limit ?? 100;
  const rows = await listDatabases(deps.pool, { workspaceId, projectId: q.projectId, logicalId: q.logicalId, cursor: decodeCursor(q.cursor), limit });
  const { items, pagination } = paginate(rows, limit);
  const connections = await connectionsOf(deps.pool, items.map((d) => d.id));
  return { data: items.map((d) => renderDatabase(deps.config, d, connections.get(d.id) ?? [])), pagination };
}

export async function databaseResponse(deps: ServiceDeps, workspaceId: string, id: string) {
  const db = await getDatabase(deps.pool, workspaceId, id);
  if (!db) throw notFound("database", id);
  const connections = await connectionsOf(deps.pool, [id]);
  return { data: renderDatabase(deps.config, db, connections.get(id) ?? []) };
}

export const databaseIdOf = (value: unknown, what = "database id") => pathId(DatabaseId, value, what, databaseIdPattern);

export function databaseRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.post("/v1/databases", async (req, reply) => {
    const raw = jsonBody(req);
    const body = parseWith(CreateDatabaseBody, raw, "request body");
    const { projectId, ...rest } = body;
    return createInProject(deps, req, reply, raw, projectId, rest, "connections");
  });

  app.get("/v1/databases", async (req) => {
    const q = parseWith(ListDatabasesQuery, req.query, "query");
    return listDatabasesResponse(deps, principalOf(req).workspaceId, q);
  });

  app.get("/v1/databases/:databaseId", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    return databaseResponse(deps, principalOf(req).workspaceId, id);
  });

  app.patch("/v1/databases/:databaseId", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const body = parseWith(UpdateDatabaseBody, jsonBody(req), "request body");
    const workspaceId = principalOf(req).workspaceId;
    let projectId: string | undefined;
    try {
      await inTransaction(deps.pool, async (client) => {
        const found = await getDatabase(client, workspaceId, id);
        if (!found) throw notFound("database", id);
        projectId = found.project_id;
        // Project before database, the order creates take: moving the default flag never deadlocks with them.
        if (body.isDefault === true) await client.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE", [found.project_id]);
        const db = await getDatabase(client, workspaceId, id, true);
        if (!db) throw notFound("database", id);
        if (body.name !== undefined) await client.query("UPDATE databases SET name = $2 WHERE id = $1", [id, body.name]);
        if (body.logicalId !== undefined && body.logicalId !== db.logical_id) {
          const { rows } = await client.query<{ id: string }>("SELECT id FROM databases WHERE project_id = $1 AND logical_id = $2 AND deleted_at IS NULL", [db.project_id, body.logicalId]);
          if (rows[0]) throw conflict(`cannot update database: logicalId "${body.logicalId}" already used by database "${rows[0].id}"`, `existing database id: ${rows[0].id}`);
          await client.query("UPDATE databases SET logical_id = $2 WHERE id = $1", [id, body.logicalId]);
        }
        if (body.isDefault === true && !db.is_default) {
          await client.query("UPDATE databases SET is_default = false WHERE project_id = $1 AND is_default AND deleted_at IS NULL", [db.project_id]);
          await client.query("UPDATE databases SET is_default = true WHERE id = $1", [id]);
        }
      });
    } catch (err) {
      // A concurrent create or PATCH took the logicalId between our check and our write: the unique index says so.
      return logicalIdConflict(deps, err, { table: "databases", scopeColumn: "project_id", scope: projectId ?? "", logicalId: body.logicalId }, "update");
    }
    return databaseResponse(deps, workspaceId, id);
  });

  app.delete("/v1/databases/:databaseId", async (req, reply) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const workspaceId = principalOf(req).workspaceId;
    await inTransaction(deps.pool, async (client) => {
      const db = await getDatabase(client, workspaceId, id, true);
      if (!db) throw notFound("database", id);
      if (db.is_default) {
        const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM databases WHERE project_id = $1 AND id <> $2 AND deleted_at IS NULL", [db.project_id, id]);
        if (Number(rows[0]!.n) > 0) throw conflict(`cannot delete database "${id}": it is the project's default database and the project has other databases`, "make another database the default first (PATCH isDefault: true)");
      }
      await client.query("UPDATE databases SET deleted_at = now(), is_default = false WHERE id = $1", [id]);
      await client.query("UPDATE connections SET revoked_at = coalesce(revoked_at, now()) WHERE database_id = $1", [id]);
      await enqueueJob(client, { kind: "drop", targetId: id });
    });
    deps.wakeJobs();
    return reply.code(204).send();
  });

  app.post("/v1/databases/:targetDatabaseId/restore", async (req, reply) => {
    const id = databaseIdOf((req.params as { targetDatabaseId?: string }).targetDatabaseId, "target database id");
    const raw = jsonBody(req);
    const body = parseWith(RestoreBody, raw, "request body");
    const workspaceId = principalOf(req).workspaceId;
    const key = req.headers["idempotency-key"];
    return idempotentPost(
      deps,
      req,
      reply,
      raw,
      async (client) => {
        const db = await getDatabase(client, workspaceId, id, true);
        if (!db) throw notFound("database", id);
        await checkBackupSource(client, workspaceId, body.source);
        if (db.status === "provisioning" || db.status === "recovering") {
          throw conflict(`cannot restore database "${id}": it is ${db.status}`, "wait until the database is ready or failed, then retry");
        }
        await client.query("UPDATE databases SET status = 'recovering', source = $2 WHERE id = $1", [id, JSON.stringify(body.source)]);
        await enqueueJob(client, { kind: "restore", targetId: id, payload: { backupId: body.source.backupId, sourceDatabaseId: body.source.databaseId }, idempotencyKey: typeof key === "string" ? key : null });
        const updated = (await getDatabase(client, workspaceId, id))!;
        const connections = await connectionsOf(client, [id]);
        return { status: 200, body: { data: renderDatabase(deps.config, updated, connections.get(id) ?? []) } };
      },
      { restore: true },
    );
  });
}
