import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import { errorBody } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { echo, invalidRequest, isUnavailable, refusesWrites, ServiceError } from "../shared/errors.ts";
import { authenticate } from "../http/request.ts";
import { checkRequestLine } from "../http/text.ts";
import { replayAnnouncement } from "../domain/idempotency.ts";
import { backupRoutes } from "../routes/backups.ts";
import { branchRoutes } from "../routes/branches.ts";
import { connectionRoutes } from "../routes/connections.ts";
import { databaseRoutes } from "../routes/databases.ts";
import { healthRoutes } from "../routes/health.ts";
import { oauthRoutes } from "../routes/oauth.ts";
import { projectRoutes } from "../routes/projects.ts";
import { regionRoutes } from "../routes/regions.ts";
import { usageRoutes } from "../routes/usage.ts";

const bodyLimitBytes = 64 * 1024;

function toServiceError(err: unknown): ServiceError | undefined {
  if (err instanceof ServiceError) return err;
  const e = err as { statusCode?: number; code?: string };
  if (e.statusCode === 413 || e.code === "FST_ERR_CTP_BODY_TOO_LARGE")
    return new ServiceError(
      "payload_too_large",
      `request body is larger than ${bodyLimitBytes} bytes`,
      "send at most 64 KiB",
    );
  if (typeof e.code === "string" && e.code.startsWith("FST_ERR_CTP"))
    return new ServiceError(
      "invalid_request",
      "invalid request body",
      "send a JSON object with Content-Type: application/json",
    );
  if (e.statusCode === 400)
    return new ServiceError("invalid_request", "invalid request", "check the request line and headers");
  if (isUnavailable(err))
    return new ServiceError(
      "unavailable",
      refusesWrites(err)
        ? "a database server of the service refuses writes for now (read-only, or out of disk space)"
        : "the service cannot reach its database",
      "retry later with the same Idempotency-Key",
      { headers: { "retry-after": "5" } },
    );
  return undefined;
}

/**
 * What Node's HTTP parser refuses before Fastify sees a request (a NUL, CR or LF in a header value, a malformed request
 * line, headers past their size, a request too slow to arrive), answered in the API's error shape rather than
 * Fastify's: still a 4xx, now with a message that says what was wrong.
 */
function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, text, message] =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "Request Timeout", "the request did not arrive in time"]
      : err.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request Header Fields Too Large", "the request's headers are too large"]
        : [400, "Bad Request", "the request line or a header is not valid HTTP (a NUL, CR or LF in a header value?)"];
  const body = JSON.stringify(errorBody("invalid_request", message, "send a well-formed HTTP/1.1 request"));
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${text}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  socket.destroy(err);
}

/** The Managed Database Service API as a fastify instance (not listening). */
export function createApp(deps: ServiceDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Our own onResponse line replaces fastify's request logs (which would include full URLs at info level).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: bodyLimitBytes,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && /^[\x21-\x7e]{1,200}$/.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
    clientErrorHandler,
    // A path the router refuses (one it cannot decode, a segment past its length) never reaches a hook: answered
    // as http/text.ts answers it, or else as a request it cannot route.
    frameworkErrors: (_err, req, reply) => {
      let e = invalidRequest("invalid request path", "check the request line");
      try {
        checkRequestLine(req);
      } catch (refused) {
        if (refused instanceof ServiceError) e = refused;
      }
      void (reply as unknown as FastifyReply)
        .code(e.status)
        .type("application/json; charset=utf-8")
        .send(errorBody(e.code, e.message, e.hint));
    },
  });

  // Bodies arrive raw; handlers decide what they accept (docs/decisions.md#transport: a wrong content type is 400, not 415).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  const routes: { pattern: RegExp; method: string }[] = [];
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const pattern = new RegExp(`^${route.url.replace(/:[A-Za-z]+/g, "[^/]+")}/?$`);
    for (const m of methods) if (m !== "HEAD") routes.push({ pattern, method: m });
  });

  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
    if (req.url.startsWith("/v1/")) reply.header(replayAnnouncement.header, replayAnnouncement.value);
    (req as FastifyRequest & { startedAt?: bigint }).startedAt = process.hrtime.bigint();
    // Before anything reads them (authentication, a route, a query): every string of the path, query and headers.
    checkRequestLine(req);
    const url = req.routeOptions.url;
    if (url?.startsWith("/v1/"))
      (req as FastifyRequest & { principal?: unknown }).principal = await authenticate(deps, req);
  });

  app.addHook("onResponse", async (req, reply) => {
    const route = req.routeOptions.url ?? "unknown";
    const started = (req as FastifyRequest & { startedAt?: bigint }).startedAt;
    const seconds = started ? Number(process.hrtime.bigint() - started) / 1e9 : 0;
    deps.metrics.requests.inc({ method: req.method, route, code: String(reply.statusCode) });
    deps.metrics.duration.observe({ method: req.method, route }, seconds);
    req.log.debug({ method: req.method, route, status: reply.statusCode, ms: Math.round(seconds * 1000) }, "request");
  });

  app.setErrorHandler(async (err, req, reply) => {
    const known = toServiceError(err);
    if (!known || known.status >= 500) {
      // Message only: pg errors and stacks can quote SQL, which stays out of bodies; secrets never reach either.
      req.log.error(
        { err: { message: (err as Error).message, code: (err as { code?: string }).code }, reqId: req.id },
        "request failed",
      );
    }
    const e = known ?? new ServiceError("internal_error", "internal error", `report request id ${req.id}`);
    reply.code(e.status).headers(e.headers).type("application/json; charset=utf-8");
    return errorBody(e.code, e.message, e.hint);
  });

  app.setNotFoundHandler(async (req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
    reply.type("application/json; charset=utf-8");
    if (allowed.length > 0) {
      reply.code(405).header("allow", allowed.join(", "));
      return errorBody(
        "method_not_allowed",
        `method ${echo(req.method, 16)} is not allowed on ${echo(path, 200)}`,
        `allowed: ${allowed.join(", ")}`,
      );
    }
    reply.code(404);
    return errorBody(
      "not_found",
      `no route for ${echo(req.method, 16)} ${echo(path, 200)}`,
      "every API path starts with /v1; see the API contract",
    );
  });

  app.addHook("onSend", async (_req, reply, payload) => {
    const type = reply.getHeader("content-type");
    if (typeof type === "string" && type.startsWith("application/json") && !type.includes("charset"))
      reply.header("content-type", "application/json; charset=utf-8");
    return payload;
  });

  healthRoutes(app, deps);
  oauthRoutes(app, deps);
  projectRoutes(app, deps);
  databaseRoutes(app, deps);
  connectionRoutes(app, deps);
  backupRoutes(app, deps);
  branchRoutes(app, deps);
  regionRoutes(app, deps);
  usageRoutes(app, deps);
  return app;
}
