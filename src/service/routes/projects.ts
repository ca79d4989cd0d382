import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  CreateProjectBody,
  CreateProjectDatabaseBody,
  ListDatabasesQuery,
  ListProjectsQuery,
  newId,
  ProjectId,
  projectIdPattern,
  type SourceBody,
} from "../../contract/index.ts";
import { createDatabaseRows, generatedName, logicalIdConflict, resolveRegion } from "../create-database.ts";
import type { ServiceDeps } from "../deps.ts";
import { conflict, notFound } from "../errors.ts";
import { idempotentPost, jsonBody, parseWith, pathId, principalOf } from "../http.ts";
import { decodeCursor, paginate } from "../pagination.ts";
import { renderCreatedDatabase, renderProject } from "../render.ts";
import type { ProjectRow } from "../rows.ts";
import { getProject, listProjects } from "../store.ts";
import { inTransaction } from "../store/pool.ts";
import { listDatabasesResponse } from "./databases.ts";

export function projectRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  const projectIdOf = (params: unknown) => pathId(ProjectId, (params as { projectId?: string }).projectId, "project id", projectIdPattern);

  app.post("/v1/projects", async (req, reply) => {
    const raw = jsonBody(req);
    const body = parseWith(CreateProjectBody, raw, "request body");
    const principal = principalOf(req);
    if (body.workspaceId !== undefined && body.workspaceId !== principal.workspaceId) throw notFound("workspace", body.workspaceId);
    const region = resolveRegion(deps, body.region, undefined);
    try {
      return await idempotentPost(deps, req, reply, raw, async (client) => {
        if (body.logicalId !== undefined) {
          const { rows } = await client.query<{ id: string }>("SELECT id FROM projects WHERE workspace_id = $1 AND logical_id = $2 AND deleted_at IS NULL", [principal.workspaceId, body.logicalId]);
          if (rows[0]) throw conflict(`cannot create project: logicalId "${body.logicalId}" already used by project "${rows[0].id}"`, `existing project id: ${rows[0].id}`);
        }
        const id = newId("project");
        await client.query("INSERT INTO projects (id, workspace_id, name, default_region, logical_id) VALUES ($1, $2, $3, $4, $5)", [
          id,
          principal.workspaceId,
          body.name ?? generatedName("project"),
          region,
          body.logicalId ?? null,
        ]);
        const project = (await getProject(client, principal.workspaceId, id))!;
        const database =
          body.createDatabase === false ? null : await createDatabaseRows(deps, client, { project, name: project.name, region, isDefault: true });
        let nested: Omit<ReturnType<typeof renderCreatedDatabase>, "project"> | null = null;
        if (database) {
          const { project: _project, ...rest } = renderCreatedDatabase(deps.config, database.row, database.connection, database.password);
          nested = rest;
        }
        return { status: 201, body: { data: { ...renderProject(deps.config, project), database: nested } } };
      });
    } catch (err) {
      return logicalIdConflict(deps, err, { table: "projects", scopeColumn: "workspace_id", scope: principal.workspaceId, logicalId: body.logicalId });
    }
  });

  app.get("/v1/projects", async (req) => {
    const q = parseWith(ListProjectsQuery, req.query, "query");
    const limit = q.limit ?? 100;
    const rows = await listProjects(deps.pool, { workspaceId: principalOf(req).workspaceId, cursor: decodeCursor(q.cursor), limit, logicalId: q.logicalId });
    const { items, pagination } = paginate(rows, limit);
    return { data: items.map((p) => renderProject(deps.config, p)), pagination };
  });

  app.get("/v1/projects/:projectId", async (req) => {
    const id = projectIdOf(req.params);
    const project = await getProject(deps.pool, principalOf(req).workspaceId, id);
    if (!project) throw notFound("project", id);
    return { data: renderProject(deps.config, project) };
  });

  app.delete("/v1/projects/:projectId", async (req, reply) => {
    const id = projectIdOf(req.params);
    await inTransaction(deps.pool, async (client) => {
      const project = await getProject(client, principalOf(req).workspaceId, id, "update");
      if (!project) throw notFound("project", id);
      const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM databases WHERE project_id = $1 AND deleted_at IS NULL", [id]);
      if (Number(rows[0]!.n) > 0) throw conflict(`cannot delete project "${id}": it still has ${rows[0]!.n} database(s)`, "delete its databases first");
      await client.query("UPDATE projects SET deleted_at = now() WHERE id = $1", [id]);
    });
    return reply.code(204).send();
  });

  app.post("/v1/projects/:projectId/databases", async (req, reply) => {
    const id = projectIdOf(req.params);
    const raw = jsonBody(req);
    const body = parseWith(CreateProjectDatabaseBody, raw, "request body");
    return createInProject(deps, req, reply, raw, id, body, "full");
  });

  app.get("/v1/projects/:projectId/databases", async (req) => {
    const id = projectIdOf(req.params);
    const q = parseWith(ListDatabasesQuery.omit({ projectId: true }), req.query, "query");
    const project = await getProject(deps.pool, principalOf(req).workspaceId, id);
    if (!project) throw notFound("project", id);
    return listDatabasesResponse(deps, principalOf(req).workspaceId, { ...q, projectId: id });
  });
}

type CreateBody = { name?: string | undefined; region?: string | undefined; isDefault?: boolean | undefined; source?: SourceBody | undefined; logicalId?: string | undefined };

/** Both database creations: `full` is the seed's endpoint 3 form, `connections` endpoint 2's (connection strings only in endpoints). */
export async function createInProject(
  deps: ServiceDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  raw: unknown,
  projectId: string,
  body: CreateBody,
  form: "full" | "connections",
): Promise<unknown> {
  const principal = principalOf(req);
  try {
    return await idempotentPost(deps, req, reply, raw, async (client) => {
      // Creates wait for each other only when they move the default flag (exactly one default per project).
      const project: ProjectRow | undefined = await getProject(client, principal.workspaceId, projectId, body.isDefault ? "update" : "share");
      if (!project) throw notFound("project", projectId);
      const created = await createDatabaseRows(deps, client, { project, name: body.name, region: body.region, isDefault: body.isDefault ?? false, source: body.source, logicalId: body.logicalId });
      const full = renderCreatedDatabase(deps.config, created.row, created.connection, created.password);
      if (form === "full") return { status: 201, body: { data: full } };
      const { apiKeys: _a, connectionString: _c, directConnection: _d, ...withConnections } = full;
      return { status: 201, body: { data: withConnections } };
    });
  } catch (err) {
    return logicalIdConflict(deps, err, { table: "databases", scopeColumn: "project_id", scope: projectId, logicalId: body.logicalId });
  }
}
