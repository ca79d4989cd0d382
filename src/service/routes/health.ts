import type { FastifyInstance } from "fastify";
import type { ServiceDeps } from "../deps.ts";
import { ServiceError } from "../errors.ts";

export function healthRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async () => {
    try {
      await deps.pool.query("SELECT 1");
    } catch (err) {
      throw new ServiceError("unavailable", "the control database is unreachable", "retry later", { cause: err, headers: { "retry-after": "5" } });
    }
    return { status: "ready" };
  });
  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
