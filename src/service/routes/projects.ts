import type { FastifyInstance } from "fastify";
import {
  CreateProjectBody,
  CreateProjectDatabaseBody,
  ListDatabasesQuery,
  ListProjectsQuery,
  ProjectId,
  projectIdPattern,
} from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { createProjectDatabase, projectDatabasePage } from "../domain/databases.ts";
import { createProject, deleteProject, projectPage, readProject } from "../domain/projects.ts";
import { creationRequest, jsonBody, parseWith, pathId, principalOf, sendCreation } from "../http/request.ts";
import { renderCreatedDatabase, renderCreatedProject, renderDatabase, renderProject } from "../http/render.ts";

export function projectRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  const projectIdOf = (params: unknown) =>
    pathId(ProjectId, (params as { projectId?: string }).projectId, "project id", projectIdPattern);

  app.post("/v1/projects", async (req, reply) => {
    const raw = jsonBody(req);
    const body = parseWith(CreateProjectBody, raw, "request body");
    const created = await createProject(deps, creationRequest(req, raw), body, ({ project, database }) => ({
      status: 201,
      body: { data: renderCreatedProject(deps.config, project, database) },
    }));
    return sendCreation(reply, created);
  });

  app.get("/v1/projects", async (req) => {
    const q = parseWith(ListProjectsQuery, req.query, "query");
    const { items, pagination } = await projectPage(deps, principalOf(req).workspaceId, q);
    return { data: items.map((p) => renderProject(deps.config, p)), pagination };
  });

  app.get("/v1/projects/:projectId", async (req) => {
    const id = projectIdOf(req.params);
    return { data: renderProject(deps.config, await readProject(deps, principalOf(req).workspaceId, id)) };
  });

  app.delete("/v1/projects/:projectId", async (req, reply) => {
    const id = projectIdOf(req.params);
    await deleteProject(deps, principalOf(req).workspaceId, id);
    return reply.code(204).send();
  });

  // The seed's endpoint 3: the full creation form (connection strings also in apiKeys and top-level fields).
  app.post("/v1/projects/:projectId/databases", async (req, reply) => {
    const id = projectIdOf(req.params);
    const raw = jsonBody(req);
    const body = parseWith(CreateProjectDatabaseBody, raw, "request body");
    const created = await createProjectDatabase(
      deps,
      creationRequest(req, raw),
      id,
      body,
      ({ row, connection, password }) => ({
        status: 201,
        body: { data: renderCreatedDatabase(deps.config, row, connection, password) },
      }),
    );
    return sendCreation(reply, created);
  });

  app.get("/v1/projects/:projectId/databases", async (req) => {
    const id = projectIdOf(req.params);
    const q = parseWith(ListDatabasesQuery.omit({ projectId: true }), req.query, "query");
    const { items, pagination } = await projectDatabasePage(deps, principalOf(req).workspaceId, id, q);
    return { data: items.map(({ db, connections }) => renderDatabase(deps.config, db, connections)), pagination };
  });
}
