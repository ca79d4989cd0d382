import { createRequire } from "node:module";
import type { Server } from "node:http";
import type { Registry } from "prom-client";

// node:http by require, not by `import`: an ES import of it reads every export of its namespace, and its lazy
// WebSocket, CloseEvent and MessageEvent getters load Node's internal undici bundle (113 internal modules instead of
// 38, about 13 MB of RSS measured in a bare process) that the operator never uses.
const { createServer } = createRequire(import.meta.url)("node:http") as typeof import("node:http");

// /healthz (liveness), /readyz (readiness) and /metrics on one small server, as controller-runtime's manager
// serves them. Probes answer in plain text so `curl` and kubelet logs show the reason. Plain node:http: three
// GET routes do not justify loading fastify (~25 MB of RSS) into the operator process.

interface HealthDeps {
  registry: Registry;
  /** Liveness: false only when the process should be restarted (e.g. the operator stopped unexpectedly). */
  isLive: () => boolean;
  /** Readiness: caches synced and the operator started. */
  isReady: () => boolean;
  /** Extra context for /readyz, e.g. "leader" or "standby (leader: other-pod)". */
  describe?: () => string;
}

interface HealthApp {
  readonly server: Server;
  close(): Promise<void>;
}

export function createHealthApp(deps: HealthDeps): HealthApp {
  const text = "text/plain; charset=utf-8";
  const server = createServer((req, res) => {
    const send = (status: number, contentType: string, body: string) => {
      res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body) });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    const route = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, text, "method not allowed\n");
    if (route === "/healthz") {
      const live = deps.isLive();
      return send(live ? 200 : 503, text, live ? "ok\n" : "not live\n");
    }
    if (route === "/readyz") {
      const ready = deps.isReady();
      const detail = deps.describe?.();
      return send(ready ? 200 : 503, text, `${ready ? "ok" : "not ready"}${detail ? `: ${detail}` : ""}\n`);
    }
    if (route === "/metrics") {
      deps.registry.metrics().then(
        (body) => send(200, deps.registry.contentType, body),
        (err: unknown) =>
          send(500, text, `cannot collect metrics: ${err instanceof Error ? err.message : String(err)}\n`),
      );
      return;
    }
    send(404, text, "not found\n");
  });
  // Probes hold no long connections: do not let an idle keep-alive socket delay shutdown.
  server.keepAliveTimeout = 5_000;
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
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
export async function listenHealth(app: HealthApp, address: string): Promise<{ url: string; port: number }> {
  const { host, port } = parseListenAddress(address);
  await new Promise<void>((resolve, reject) => {
    app.server.once("error", reject);
    app.server.listen(port, host, () => {
      app.server.off("error", reject);
      resolve();
    });
  });
  const bound = app.server.address();
  const actualPort = typeof bound === "object" && bound !== null ? bound.port : port;
  const shownHost = host === "0.0.0.0" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shownHost}:${actualPort}`, port: actualPort };
}
