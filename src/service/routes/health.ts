import type { FastifyInstance } from "fastify";
import type { ServiceDeps } from "../runtime/deps.ts";
import { checkReady } from "../domain/health.ts";

export function healthRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async () => {
    await checkReady(deps);
    return { status: "ready" };
  });
  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
