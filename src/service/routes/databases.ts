import type { FastifyInstance } from "fastify";
import { CreateDatabaseBody, ListDatabasesQuery, RestoreBody, UpdateDatabaseBody } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import {
  createProjectDatabase,
  databasePage,
  deleteDatabase,
  readDatabase,
  updateDatabase,
} from "../domain/databases.ts";
import { startRestore } from "../domain/restores.ts";
import { creationRequest, databaseIdOf, jsonBody, parseWith, principalOf, sendCreation } from "../http/request.ts";
import { renderCreatedDatabaseConnections, renderDatabase } from "../http/render.ts";

export function databaseRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  // The seed's endpoint 2: connection strings only in `connections` (POST /v1/projects/{id}/databases has the full form).
  app.post("/v1/databases", async (req, reply) => {
    const raw = jsonBody(req);
    const { projectId, ...body } = parseWith(CreateDatabaseBody, raw, "request body");
    const created = await createProjectDatabase(
      deps,
      creationRequest(req, raw),
      projectId,
      body,
      ({ row, connection, password }) => ({
        status: 201,
        body: { data: renderCreatedDatabaseConnections(deps.config, row, connection, password) },
      }),
    );
    return sendCreation(reply, created);
  });

  app.get("/v1/databases", async (req) => {
    const q = parseWith(ListDatabasesQuery, req.query, "query");
    const { items, pagination } = await databasePage(deps, principalOf(req).workspaceId, q);
    return { data: items.map(({ db, connections }) => renderDatabase(deps.config, db, connections)), pagination };
  });

  app.get("/v1/databases/:databaseId", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const { db, connections } = await readDatabase(deps, principalOf(req).workspaceId, id);
    return { data: renderDatabase(deps.config, db, connections) };
  });

  app.patch("/v1/databases/:databaseId", async (req) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    const body = parseWith(UpdateDatabaseBody, jsonBody(req), "request body");
    const { db, connections } = await updateDatabase(deps, principalOf(req).workspaceId, id, body);
    return { data: renderDatabase(deps.config, db, connections) };
  });

  app.delete("/v1/databases/:databaseId", async (req, reply) => {
    const id = databaseIdOf((req.params as { databaseId?: string }).databaseId);
    await deleteDatabase(deps, principalOf(req).workspaceId, id);
    return reply.code(204).send();
  });

  app.post("/v1/databases/:targetDatabaseId/restore", async (req, reply) => {
    const id = databaseIdOf((req.params as { targetDatabaseId?: string }).targetDatabaseId, "target database id");
    const raw = jsonBody(req);
    const body = parseWith(RestoreBody, raw, "request body");
    const restoring = await startRestore(deps, creationRequest(req, raw), id, body.source, ({ db, connections }) => ({
      status: 200,
      body: { data: renderDatabase(deps.config, db, connections) },
    }));
    return sendCreation(reply, restoring);
  });
}
