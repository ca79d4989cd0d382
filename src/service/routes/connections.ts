import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type pg from "pg";
import {
  ConnectionId,
  connectionIdPattern,
  CreateConnectionBody,
  CreateConnectionForDatabaseBody,
  ListConnectionsQuery,
  ListQuery,
  RotateConnectionBody,
} from "../../contract/index.ts";
import { insertConnection } from "../create-database.ts";
import { randomPassword, scramVerifier } from "../crypto.ts";
import { tenantLimitsOf } from "../config.ts";
import { regionPool, type ServiceDeps } from "../deps.ts";
import { conflict, notFound } from "../errors.ts";
import { idempotentPost, jsonBody, parseWith, pathId, principalOf } from "../http.ts";
import { decodeCursor, paginate } from "../pagination.ts";
import { ensureLoginRole, ensureOwnerRole, revokeLoginRole, rotateLoginRole } from "../provisioner.ts";
import { renderConnection, renderCreatedConnection, renderIssuedConnection } from "../render.ts";
import type { ConnectionRow, DatabaseRow } from "../rows.ts";
import { databasesByIds, getConnection, getDatabase, listConnections } from "../store.ts";
import { inTransaction } from "../store/pool.ts";
import { databaseIdOf } from "./databases.ts";

const connectionIdOf = (params: unknown) => pathId(ConnectionId, (params as { connectionId?: string }).connectionId, "connection id", connectionIdPattern);

/** A page of live connections with their databases, in the workspace (CONTRACT §7 order and cursor). */
async function connectionPage(deps: ServiceDeps, workspaceId: string, q: { databaseId?: string | undefined; cursor?: string | undefined; limit?: number | undefined }) {
  const limit = q.limit ?? 100;
  const { items, pagination } = paginate(await listConnections(deps.pool, { workspaceId, databaseId: q.databaseId, cursor: decodeCursor(q.cursor), limit }), limit);
  const databases = await databasesByIds(deps.pool, workspaceId, [...new Set(items.map((c) => c.database_id))]);
  // A database deleted between the two reads drops its connections from the page rather than failing it.
  const data = items.flatMap((c) => {
    const db = databases.get(c.database_id);
    return db ? [renderConnection(deps.config, db, c)] : [];
  });
  return { data, pagination };
}

/**
 * Mints a connection (row and login role) for a database of the caller's workspace, in one transaction with its
 * Idempotency-Key record. The database row lock serialises this with provisioning, which creates the roles of all
 * live connections.
 */
function mintConnection(
  deps: ServiceDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  raw: unknown,
  input: { databaseId: string; name: string },
  render: (db: DatabaseRow, c: ConnectionRow, password: string) => unknown,
): Promise<unknown> {
  const workspaceId = principalOf(req).workspaceId;
  return idempotentPost(deps, req, reply, raw, async (client) => {
    const db = await getDatabase(client, workspaceId, input.databaseId, true);
    if (!db) throw notFound("database", input.databaseId);
    const { connection, password, verifier } = await insertConnection(client, db.id, input.name);
    const pool = regionPool(deps, db.region);
    await ensureOwnerRole(pool, db.owner_role);
    await ensureLoginRole(pool, db.owner_role, { roleName: connection.role_name, verifier }, tenantLimitsOf(deps.config, db.region));
    return { status: 201, body: { data: render(db, connection, password) } };
  });
}

/** The live connection and its database, both locked (database first, the order every writer takes); 404 otherwise. */
async function lockConnection(client: pg.PoolClient, workspaceId: string, id: string): Promise<{ connection: ConnectionRow; db: DatabaseRow }> {
  const found = await getConnection(client, workspaceId, id);
  if (!found) throw notFound("connection", id);
  const db = await getDatabase(client, workspaceId, found.database_id, true);
  // Read again under the lock: a concurrent revocation or database deletion has committed by now.
  const connection = db && (await getConnection(client, workspaceId, id, true));
  if (!db || !connection) throw notFound("connection", id);
  return { connection, db };
}

export function connectionRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/v1/databases/:databaseId/connections", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(ListQuery, req.query, "query");
    const workspaceId = principalOf(req).workspaceId;
    if (!(await getDatabase(deps.pool, workspaceId, id))) throw notFound("database", id);
    return connectionPage(deps, workspaceId, { ...q, databaseId: id });
  });

  app.post("/v1/databases/:databaseId/connections", async (req, reply) => {
    const databaseId = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const raw = jsonBody(req);
    const body = parseWith(CreateConnectionBody, raw, "request body");
    return mintConnection(deps, req, reply, raw, { databaseId, name: body.name }, (db, c, password) => renderCreatedConnection(deps.config, db, c, password));
  });

  // The public API's connection endpoints (PUBLIC-API.md).
  app.post("/v1/connections", async (req, reply) => {
    const raw = jsonBody(req);
    const body = parseWith(CreateConnectionForDatabaseBody, raw, "request body");
    return mintConnection(deps, req, reply, raw, body, (db, c, password) => renderIssuedConnection(deps.config, db, c, password));
  });

  app.get("/v1/connections", async (req) => {
    const q = parseWith(ListConnectionsQuery, req.query, "query");
    // Like `projectId` on GET /v1/databases: an unknown or foreign database id filters everything out (CONTRACT §7).
    return connectionPage(deps, principalOf(req).workspaceId, q);
  });

  app.get("/v1/connections/:connectionId", async (req) => {
    const id = connectionIdOf(req.params);
    const workspaceId = principalOf(req).workspaceId;
    const connection = await getConnection(deps.pool, workspaceId, id);
    const db = connection && (await getDatabase(deps.pool, workspaceId, connection.database_id));
    if (!connection || !db) throw notFound("connection", id);
    return { data: renderConnection(deps.config, db, connection) };
  });

  app.post("/v1/connections/:connectionId/rotate", async (req, reply) => {
    const id = connectionIdOf(req.params);
    const raw = jsonBody(req);
    parseWith(RotateConnectionBody, raw, "request body");
    const workspaceId = principalOf(req).workspaceId;
    return idempotentPost(deps, req, reply, raw, async (client) => {
      const { connection, db } = await lockConnection(client, workspaceId, id);
      // Provisioning writes the verifiers it read when it started: a rotation now could be overwritten by the old one.
      if (db.status === "provisioning") throw conflict(`cannot rotate connection "${id}": its database is provisioning`, "wait until the database is ready, then retry");
      const password = randomPassword();
      const verifier = await scramVerifier(password);
      await client.query("UPDATE connections SET verifier = $2 WHERE id = $1", [id, verifier]);
      // Unlike the public API's best-effort revocation, the old password stops at once and its sessions end.
      const pool = regionPool(deps, db.region);
      await ensureOwnerRole(pool, db.owner_role);
      await rotateLoginRole(pool, db.owner_role, { roleName: connection.role_name, verifier }, tenantLimitsOf(deps.config, db.region));
      return { status: 200, body: { data: renderIssuedConnection(deps.config, db, connection, password) } };
    });
  });

  app.delete("/v1/connections/:connectionId", async (req, reply) => {
    const id = connectionIdOf(req.params);
    const workspaceId = principalOf(req).workspaceId;
    await inTransaction(deps.pool, async (client) => {
      const { connection, db } = await lockConnection(client, workspaceId, id);
      await client.query("UPDATE connections SET revoked_at = now() WHERE id = $1", [id]);
      if (db.default_connection_id === id) {
        // Point the default at the newest live connection, if any remains.
        await client.query(
          `UPDATE databases SET default_connection_id = coalesce((SELECT id FROM connections WHERE database_id = $1 AND revoked_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 1), default_connection_id) WHERE id = $1`,
          [db.id],
        );
      }
      // Ends the role's open sessions too, not only its future logins.
      await revokeLoginRole(regionPool(deps, db.region), connection.role_name);
    });
    return reply.code(204).send();
  });
}
