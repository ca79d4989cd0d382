import type pg from "pg";
import { newId } from "../../contract/index.ts";
import { serverConfigOf, tenantLimitsOf } from "../config/config.ts";
import { randomPassword, scramVerifier } from "../shared/crypto.ts";
import { serverPool, type ServiceDeps } from "../runtime/deps.ts";
import { conflict, notFound } from "../shared/errors.ts";
import { createOnce, type Creation, type CreationRequest, type StoredResponse } from "./idempotency.ts";
import { decodeCursor, paginate } from "../store/pagination.ts";
import { newPgName } from "../placement/pg-names.ts";
import {
  ensureLoginRole,
  ensureOwnerRole,
  openSessionsOf,
  revokeLoginRole,
  rotateLoginRole,
} from "../placement/provisioner.ts";
import type { ConnectionRow, DatabaseRow } from "../store/rows.ts";
import { databasesByIds, getConnection, getDatabase, listConnections } from "../store/queries.ts";
import { inTransaction } from "../store/pool.ts";

// A connection is a login role of one database (placement/provisioner.ts): minting, rotating and revoking change the row and
// the role together, in the transaction that holds the database's row lock.

export type ConnectionView = { connection: ConnectionRow; db: DatabaseRow };
/** A connection just minted or rotated: its password exists only here and in the response. */
type IssuedConnection = ConnectionView & { password: string };

type ConnectionQuery = { databaseId?: string | undefined; cursor?: string | undefined; limit?: number | undefined };

/** A page of live connections with their databases, in the workspace (order and cursor: docs/decisions.md#lists). */
export async function connectionPage(deps: ServiceDeps, workspaceId: string, q: ConnectionQuery) {
  const limit = q.limit ?? 100;
  const { items, pagination } = paginate(
    await listConnections(deps.pool, { workspaceId, databaseId: q.databaseId, cursor: decodeCursor(q.cursor), limit }),
    limit,
  );
  const databases = await databasesByIds(deps.pool, workspaceId, [...new Set(items.map((c) => c.database_id))]);
  // A database deleted between the two reads drops its connections from the page rather than failing it.
  const views = items.flatMap((connection): ConnectionView[] => {
    const db = databases.get(connection.database_id);
    return db ? [{ connection, db }] : [];
  });
  return { items: views, pagination };
}

/** GET /v1/databases/{id}/connections: unlike the `databaseId` filter of /v1/connections, an unknown database is 404. */
export async function databaseConnectionPage(
  deps: ServiceDeps,
  workspaceId: string,
  databaseId: string,
  q: Omit<ConnectionQuery, "databaseId">,
) {
  if (!(await getDatabase(deps.pool, workspaceId, databaseId))) throw notFound("database", databaseId);
  return connectionPage(deps, workspaceId, { ...q, databaseId });
}

/** Inserts a login role's connection row; the password exists only in memory and in the caller's response. */
async function insertConnection(
  client: pg.PoolClient,
  databaseId: string,
  name: string,
): Promise<{ connection: ConnectionRow; password: string; verifier: string }> {
  const id = newId("connection");
  const password = randomPassword();
  const verifier = await scramVerifier(password);
  const { rows } = await client.query<ConnectionRow>(
    `INSERT INTO connections (id, database_id, name, role_name, verifier) VALUES ($1, $2, $3, $4, $5)
     RETURNING id, database_id, name, role_name, created_at`,
    [id, databaseId, name, newPgName(), verifier],
  );
  return { connection: rows[0]!, password, verifier };
}

// Any fixed number (with the workspace's hash): serialises one workspace's quota checks until their transactions end.
const quotaLock = 7_221_022;

/**
 * Each connection is a login role, and so sessions on the server: one workspace may not mint them without end. The
 * first connection of a new database counts but is never refused (that would be a cap on databases). Under a
 * transaction lock per workspace, so two concurrent mints cannot both take the last place.
 */
async function checkConnectionQuota(client: pg.PoolClient, limit: number, workspaceId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [quotaLock, workspaceId]);
  const { rows } = await client.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM connections c JOIN databases d ON d.id = c.database_id WHERE d.workspace_id = $1 AND d.deleted_at IS NULL AND c.revoked_at IS NULL",
    [workspaceId],
  );
  if (rows[0]!.n >= limit) {
    throw conflict(
      `cannot mint a connection: this workspace has ${rows[0]!.n} live connections, its limit is ${limit}`,
      "revoke a connection you no longer use (DELETE /v1/connections/{id}), or ask the service's operator to raise connectionsPerWorkspace",
    );
  }
}

/**
 * Mints a connection (row and login role) for a database of the caller's workspace, in one transaction with its
 * Idempotency-Key record. The database row lock serialises this with provisioning, which creates the roles of all
 * live connections. `respond` renders it: that rendering is what a replay returns.
 */
export function mintConnection(
  deps: ServiceDeps,
  request: CreationRequest,
  input: { databaseId: string; name: string },
  respond: (issued: IssuedConnection) => StoredResponse,
): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const db = await getDatabase(client, request.workspaceId, input.databaseId, true);
    if (!db) throw notFound("database", input.databaseId);
    await checkConnectionQuota(client, deps.config.connectionsPerWorkspace, request.workspaceId);
    const { connection, password, verifier } = await insertConnection(client, db.id, input.name);
    const pool = serverPool(deps, db);
    await ensureOwnerRole(pool, db.owner_role);
    await ensureLoginRole(
      pool,
      db.owner_role,
      { roleName: connection.role_name, verifier },
      tenantLimitsOf(deps.config, db.region),
    );
    return respond({ db, connection, password });
  });
}

/** The live connection of a live database of the workspace, or 404. */
async function readConnection(deps: ServiceDeps, workspaceId: string, id: string): Promise<ConnectionView> {
  const connection = await getConnection(deps.pool, workspaceId, id);
  const db = connection && (await getDatabase(deps.pool, workspaceId, connection.database_id));
  if (!connection || !db) throw notFound("connection", id);
  return { connection, db };
}

/**
 * GET /v1/connections/{id}: the connection and how many client sessions use its login now, counted on its database's
 * server (provisioner.ts, openSessionsOf); undefined when they cannot be seen (a pooler this process does not run).
 * Lists never carry the count: it costs a query of the server per connection.
 */
export async function readConnectionWithSessions(
  deps: ServiceDeps,
  workspaceId: string,
  id: string,
): Promise<ConnectionView & { openSessions: number | undefined }> {
  const view = await readConnection(deps, workspaceId, id);
  const pooler = serverConfigOf(deps.config, view.db)?.pooler !== undefined;
  return {
    ...view,
    openSessions: await openSessionsOf(serverPool(deps, view.db), view.connection.role_name, pooler),
  };
}

/** The live connection and its database, both locked (database first, the order every writer takes); 404 otherwise. */
async function lockConnection(client: pg.PoolClient, workspaceId: string, id: string): Promise<ConnectionView> {
  const found = await getConnection(client, workspaceId, id);
  if (!found) throw notFound("connection", id);
  const db = await getDatabase(client, workspaceId, found.database_id, true);
  // Read again under the lock: a concurrent revocation or database deletion has committed by now.
  const connection = db && (await getConnection(client, workspaceId, id, true));
  if (!db || !connection) throw notFound("connection", id);
  return { connection, db };
}

/** Same login, new password: the old password stops at once and its sessions end before this returns. */
export function rotateConnection(
  deps: ServiceDeps,
  request: CreationRequest,
  id: string,
  respond: (issued: IssuedConnection) => StoredResponse,
): Promise<Creation> {
  return createOnce(deps, request, async (client) => {
    const { connection, db } = await lockConnection(client, request.workspaceId, id);
    // Provisioning writes the verifiers it read when it started: a rotation now could be overwritten by the old one.
    if (db.status === "provisioning")
      throw conflict(
        `cannot rotate connection "${id}": its database is provisioning`,
        "wait until the database is ready, then retry",
      );
    const password = randomPassword();
    const verifier = await scramVerifier(password);
    await client.query("UPDATE connections SET verifier = $2 WHERE id = $1", [id, verifier]);
    // Unlike the public API's best-effort revocation, the old password stops at once and its sessions end.
    const pool = serverPool(deps, db);
    await ensureOwnerRole(pool, db.owner_role);
    await rotateLoginRole(
      pool,
      db.owner_role,
      { roleName: connection.role_name, verifier },
      tenantLimitsOf(deps.config, db.region),
    );
    return respond({ db, connection, password });
  });
}

/** The login can no longer log in and none of its sessions remain when this returns; the database's default moves on. */
export async function revokeConnection(deps: ServiceDeps, workspaceId: string, id: string): Promise<void> {
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
    await revokeLoginRole(serverPool(deps, db), connection.role_name);
  });
}
