import Fastify, { type FastifyInstance } from "fastify";
import type { Registry } from "prom-client";

// /healthz (liveness), /readyz (readiness) and /metrics on one small server, as controller-runtime's manager
// serves them. Probes answer in plain text so `curl` and kubelet logs show the reason.

export interface HealthDeps {
  registry: Registry;
  /** Liveness: false only when the process should be restarted (e.g. the operator stopped unexpectedly). */
  isLive: () => boolean;
  /** Readiness: caches synced and the operator started. */
  isReady: () => boolean;
  /** Extra context for /readyz, e.g. "leader" or "standby (leader: other-pod)". */
  describe?: () => string;
}

export function createHealthApp(deps: HealthDeps): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get("/healthz", async (_req, reply) => {
    const live = deps.isLive();
    return reply.code(live ? 200 : 503).type("text/plain; charset=utf-8").send(live ? "ok\n" : "not live\n");
  });
  app.get("/readyz", async (_req, reply) => {
    const ready = deps.isReady();
    const detail = deps.describe?.();
    const text = `${ready ? "ok" : "not ready"}${detail ? `: ${detail}` : ""}\n`;
    return reply.code(ready ? 200 : 503).type("text/plain; charset=utf-8").send(text);
  });
  app.get("/metrics", async (_req, reply) => {
    const body = await deps.registry.metrics();
    return reply.type(deps.registry.contentType).send(body);
  });
  return app;
}

/** Parses "host:port", ":port" or "port"; an empty host binds every interface. */
export function parseListenAddress(address: string): { host: string; port: number } {
  const m = /^(?:(\[[^\]]+\]|[^:]*):)?(\d{1,5})$/.exec(address.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new Error(`invalid listen address "${address}": expected host:port, :port or port`);
  }
  const host = (m[1] ?? "").replace(/^\[|\]$/g, "");
  return { host: host === "" ? "0.0.0.0" : host, port };
}

/** Listens and returns the bound address (port 0 picks a free one). */
export async function listenHealth(app: FastifyInstance, address: string): Promise<{ url: string; port: number }> {
  const { host, port } = parseListenAddress(address);
  await app.listen({ host, port });
  const bound = app.server.address();
  const actualPort = typeof bound === "object" && bound !== null ? bound.port : port;
  const shownHost = host === "0.0.0.0" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shownHost}:${actualPort}`, port: actualPort };
}
