import type { FastifyInstance } from "fastify";
import {
  ConnectionId,
  connectionIdPattern,
  CreateConnectionBody,
  CreateConnectionForDatabaseBody,
  ListConnectionsQuery,
  ListQuery,
  RotateConnectionBody,
} from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import {
  connectionPage,
  databaseConnectionPage,
  mintConnection,
  readConnectionWithSessions,
  revokeConnection,
  rotateConnection,
  type ConnectionView,
} from "../domain/connections.ts";
import {
  creationRequest,
  databaseIdOf,
  jsonBody,
  parseWith,
  pathId,
  principalOf,
  sendCreation,
} from "../http/request.ts";
import { renderConnection, renderCreatedConnection, renderIssuedConnection } from "../http/render.ts";

const connectionIdOf = (params: unknown) =>
  pathId(ConnectionId, (params as { connectionId?: string }).connectionId, "connection id", connectionIdPattern);

export function connectionRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  const renderPage = ({ items, pagination }: { items: ConnectionView[]; pagination: unknown }) => ({
    data: items.map(({ db, connection }) => renderConnection(deps.config, db, connection)),
    pagination,
  });

  app.get("/v1/databases/:databaseId/connections", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const q = parseWith(ListQuery, req.query, "query");
    return renderPage(await databaseConnectionPage(deps, principalOf(req).workspaceId, id, q));
  });

  app.post("/v1/databases/:databaseId/connections", async (req, reply) => {
    const databaseId = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const raw = jsonBody(req);
    const body = parseWith(CreateConnectionBody, raw, "request body");
    const minted = await mintConnection(
      deps,
      creationRequest(req, raw),
      { databaseId, name: body.name },
      ({ db, connection, password }) => ({
        status: 201,
        body: { data: renderCreatedConnection(deps.config, db, connection, password) },
      }),
    );
    return sendCreation(reply, minted);
  });

  // The public API's connection endpoints (PUBLIC-API.md).
  app.post("/v1/connections", async (req, reply) => {
    const raw = jsonBody(req);
    const body = parseWith(CreateConnectionForDatabaseBody, raw, "request body");
    const minted = await mintConnection(deps, creationRequest(req, raw), body, ({ db, connection, password }) => ({
      status: 201,
      body: { data: renderIssuedConnection(deps.config, db, connection, password) },
    }));
    return sendCreation(reply, minted);
  });

  app.get("/v1/connections", async (req) => {
    const q = parseWith(ListConnectionsQuery, req.query, "query");
    // Like `projectId` on GET /v1/databases: an unknown or foreign database id filters everything out (docs/decisions.md#lists).
    return renderPage(await connectionPage(deps, principalOf(req).workspaceId, q));
  });

  app.get("/v1/connections/:connectionId", async (req) => {
    const id = connectionIdOf(req.params);
    const { db, connection, openSessions } = await readConnectionWithSessions(deps, principalOf(req).workspaceId, id);
    // openSessions: our extension (docs/decisions.md#extensions), what a rotation waits for before revoking a login.
    return {
      data: {
        ...renderConnection(deps.config, db, connection),
        ...(openSessions === undefined ? {} : { openSessions }),
      },
    };
  });

  app.post("/v1/connections/:connectionId/rotate", async (req, reply) => {
    const id = connectionIdOf(req.params);
    const raw = jsonBody(req);
    parseWith(RotateConnectionBody, raw, "request body");
    const rotated = await rotateConnection(deps, creationRequest(req, raw), id, ({ db, connection, password }) => ({
      status: 200,
      body: { data: renderIssuedConnection(deps.config, db, connection, password) },
    }));
    return sendCreation(reply, rotated);
  });

  app.delete("/v1/connections/:connectionId", async (req, reply) => {
    const id = connectionIdOf(req.params);
    await revokeConnection(deps, principalOf(req).workspaceId, id);
    return reply.code(204).send();
  });
}
