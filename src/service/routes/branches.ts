import type { FastifyInstance } from "fastify";
import {
  BranchId,
  branchIdPattern,
  CreateBranchBody,
  ListBranchesQuery,
  ProjectId,
  projectIdPattern,
  UpdateBranchBody,
} from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { branchPage, createBranch, deleteBranch, readBranch, updateBranch } from "../domain/branches.ts";
import { creationRequest, jsonBody, parseWith, pathId, principalOf, sendCreation } from "../http/request.ts";
import { renderBranch } from "../http/render.ts";

// The public API's branches (PUBLIC-API.md "Branches"). Its status codes where it documents them: a bad gitName is
// 422 on create, and on PATCH everything but isDefault (a gitName rename, a role change, an unknown field) is 422.

export function branchRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  const projectIdOf = (params: unknown) =>
    pathId(ProjectId, (params as { projectId?: string }).projectId, "project id", projectIdPattern);
  const branchIdOf = (params: unknown) =>
    pathId(BranchId, (params as { branchId?: string }).branchId, "branch id", branchIdPattern);

  app.post("/v1/projects/:projectId/branches", async (req, reply) => {
    const id = projectIdOf(req.params);
    const raw = jsonBody(req, ["gitName"]);
    // 422 when the gitName is what is wrong (the public API's "Invalid gitName"), 400 for anything else.
    const issues = CreateBranchBody.safeParse(raw).error?.issues ?? [];
    const gitNameOnly = issues.length > 0 && issues.every((i) => i.path[0] === "gitName");
    const body = parseWith(CreateBranchBody, raw, "request body", gitNameOnly ? "unprocessable" : "invalid_request");
    const created = await createBranch(deps, creationRequest(req, raw), id, body, (branch) => ({
      status: 201,
      body: { data: renderBranch(deps.config, branch) },
    }));
    return sendCreation(reply, created);
  });

  app.get("/v1/projects/:projectId/branches", async (req) => {
    const id = projectIdOf(req.params);
    const q = parseWith(ListBranchesQuery, req.query, "query");
    const { items, pagination } = await branchPage(deps, principalOf(req).workspaceId, id, q);
    return { data: items.map((b) => renderBranch(deps.config, b)), pagination };
  });

  app.get("/v1/branches/:branchId", async (req) => {
    const id = branchIdOf(req.params);
    return { data: renderBranch(deps.config, await readBranch(deps, principalOf(req).workspaceId, id)) };
  });

  app.patch("/v1/branches/:branchId", async (req) => {
    const id = branchIdOf(req.params);
    const body = parseWith(UpdateBranchBody, jsonBody(req, ["gitName", "role"]), "request body", "unprocessable");
    return { data: renderBranch(deps.config, await updateBranch(deps, principalOf(req).workspaceId, id, body)) };
  });

  app.delete("/v1/branches/:branchId", async (req, reply) => {
    const id = branchIdOf(req.params);
    await deleteBranch(deps, principalOf(req).workspaceId, id);
    return reply.code(204).send();
  });
}
