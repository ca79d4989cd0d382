import type { FastifyInstance } from "fastify";
import { ConnectionId, connectionIdPattern, CreateConnectionBody, ListQuery } from "../../contract/index.ts";
import { insertConnection } from "../create-database.ts";
import { regionPool, type ServiceDeps } from "../deps.ts";
import { notFound } from "../errors.ts";
import { idempotentPost, jsonBody, parseWith, pathId, principalOf } from "../http.ts";
import { ensureLoginRole, ensureOwnerRole, revokeLoginRole } from "../provisioner.ts";
import { renderConnection, renderCreatedConnection } from "../render.ts";
import { decodeCursor, paginate } from "../pagination.ts";
import { getConnection, getDatabase, listConnections } from "../store.ts";
import { inTransaction } from "../store/pool.ts";
import { databaseIdOf } from "./databases.ts";

export function connectionRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/connections", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(ListQuery, req.query, "query");
    const db = await getDatabase(deps.pool, principalOf(req).workspaceId, id);
    if (!db) throw notFound("database", id);
    const limit = q.limit ?? 100;
    const { items, pagination } = paginate(await listConnections(deps.pool, { databaseId: id, cursor: decodeCursor(q.cursor), limit }), limit);
    return { data: items.map((c) => renderConnection(deps.config, db, c)), pagination };
  });

  app.post("/v1/databases/:databaseId/connections", async (req, reply) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const raw = jsonBody(req);
    const body = parseWith(CreateConnectionBody, raw, "request body");
    const workspaceId = principalOf(req).workspaceId;
    return idempotentPost(deps, req, reply, raw, async (client) => {
      // The row lock serialises this with provisioning, which creates the roles of all live connections.
      const db = await getDatabase(client, workspaceId, id, true);
      if (!db) throw notFound("database", id);
      const { connection, password, verifier } = await insertConnection(client, id, body.name);
      const pool = regionPool(deps, db.region);
      await ensureOwnerRole(pool, db.owner_role);
      await ensureLoginRole(pool, db.owner_role, { roleName: connection.role_name, verifier });
      return { status: 201, body: { data: renderCreatedConnection(deps.config, db, connection, password) } };
    });
  });

  app.delete("/v1/connections/:connectionId", async (req, reply) => {
    const id = pathId(ConnectionId, (req.params as { connectionId?: string }).connectionId, "connection id", connectionIdPattern);
    const workspaceId = principalOf(req).workspaceId;
    await inTransaction(deps.pool, async (client) => {
      const found = await getConnection(client, workspaceId, id);
      if (!found) throw notFound("connection", id);
      const db = (await getDatabase(client, workspaceId, found.database_id, true))!;
      await client.query("UPDATE connections SET revoked_at = now() WHERE id = $1", [id]);
      if (db.default_connection_id === id) {
        // Point the default at the newest live connection, if any remains.
        await client.query(
          `UPDATE databases SET default_connection_id = coalesce((SELECT id FROM connections WHERE database_id = $1 AND revoked_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 1), default_connection_id) WHERE id = $1`,
          [db.id],
        );
      }
      await revokeLoginRole(regionPool(deps, db.region), found.role_name);
    });
    return reply.code(204).send();
  });
}
