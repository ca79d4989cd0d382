import { createHash } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { DatabaseId, databaseIdPattern } from "../../contract/index.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { echo, invalidRequest, ServiceError } from "../shared/errors.ts";
import type { Creation, CreationRequest } from "../domain/idempotency.ts";
import { findPrincipal, requiredScopes, type Principal } from "../domain/tokens.ts";
import { checkJsonStrings, utf8Body } from "./text.ts";

// Request plumbing shared by the routes: bodies, ids, queries, auth, the request and response of a creation.

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.join(".") : "body";
  if (issue.code === "unrecognized_keys")
    return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${[...issue.path, k].join(".")}"`).join(", ")}`;
  return `${where}: ${issue.message}`;
}

/** `code`: 400 `invalid_request` (docs/decisions.md#transport), or 422 `unprocessable` where the public API answers so. */
export function parseWith<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
  code: "invalid_request" | "unprocessable" = "invalid_request",
): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issues = result.error.issues.slice(0, 5).map(describeIssue).join("; ");
    throw new ServiceError(
      code,
      `invalid ${what}: ${issues}`,
      "see the API contract for the fields this endpoint accepts",
    );
  }
  return result.data;
}

/**
 * The JSON object body of a request: wrong content type, bad JSON or a non-object are 400. An absent body is `{}`.
 * Every string in it passes http/text.ts's check; a bad value of a field in `unprocessable` is 422 (checkJsonStrings).
 */
export function jsonBody(req: FastifyRequest, unprocessable: readonly string[] = []): Record<string, unknown> {
  const raw = req.body;
  if (raw === undefined || raw === null || (Buffer.isBuffer(raw) && raw.length === 0)) return {};
  const type = req.headers["content-type"] ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw invalidRequest(
      `unsupported content type ${echo(type)}`,
      "send the body as JSON with Content-Type: application/json",
    );
  }
  let value: unknown;
  const text = utf8Body(raw as Buffer);
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidRequest("request body is not valid JSON", "send a JSON object");
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw invalidRequest("request body must be a JSON object", "send a JSON object");
  checkJsonStrings(value, unprocessable);
  return value as Record<string, unknown>;
}

export function pathId(schema: z.ZodType<string>, value: unknown, what: string, pattern: RegExp): string {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidRequest(`invalid ${what} ${echo(value)}`, `${what}s match ${pattern.source}`);
  // The patterns allow any non-space character: a NUL, a control character or a lone surrogate was refused before the
  // route ran, with every other string of the request (http/text.ts, checkRequestLine).
  return result.data;
}

/** The database id of a path: most routes under /v1/databases/{id} and the restore's target. */
export const databaseIdOf = (value: unknown, what = "database id") =>
  pathId(DatabaseId, value, what, databaseIdPattern);

const rateLimited = (message: string, wait: number) =>
  new ServiceError("rate_limited", message, `retry after ${wait} s`, { headers: { "retry-after": String(wait) } });

/**
 * The budget key of an authentication attempt: the client's address and the first characters of the credential it
 * presents (hashed: the limiter holds no token material). Every team behind one address (the operator's pod, a NAT)
 * has its own budget, so a team's bad token never spends another's; one token, or guesses at one token, share a
 * budget. 16 characters: "mds_at_" and 9 random ones at least (54 bits), so no team can aim at another's budget.
 */
function attemptKey(address: string, credential: string): string {
  return `${address} ${createHash("sha256").update(credential.slice(0, 16)).digest("base64url").slice(0, 22)}`;
}

/** Counts an authentication attempt of the client's address with this credential (every /oauth/token request, every failed bearer token). */
export function takeAuthAttempt(deps: ServiceDeps, req: FastifyRequest, credential: string): void {
  const wait = deps.authLimiter.take(attemptKey(req.ip, credential));
  if (wait > 0) throw rateLimited("too many failed authentications with this token from this address", wait);
}

export async function authenticate(deps: ServiceDeps, req: FastifyRequest): Promise<Principal> {
  const failed = (credential: string, error: ServiceError) => {
    takeAuthAttempt(deps, req, credential);
    return error;
  };
  const header = req.headers.authorization;
  if (!header)
    throw failed("", new ServiceError("unauthorized", "missing bearer token", "send Authorization: Bearer <token>"));
  const match = /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header);
  if (!match)
    throw failed(
      "",
      new ServiceError("unauthorized", "malformed Authorization header", "send Authorization: Bearer <token>"),
    );
  const token = match[1]!;
  // A token whose budget is spent here is refused before it is even looked up: a looping bad token costs nothing.
  const blocked = deps.authLimiter.exhausted(attemptKey(req.ip, token));
  if (blocked > 0) throw rateLimited("too many failed authentications with this token from this address", blocked);
  const principal = await findPrincipal(deps.pool, token);
  if (!principal)
    throw failed(
      token,
      new ServiceError(
        "unauthorized",
        "invalid, expired or revoked token",
        "create a new token with `mds token create`",
      ),
    );
  const missing = requiredScopes.filter((s) => !principal.scopes.includes(s));
  if (missing.length)
    throw new ServiceError(
      "forbidden",
      `token lacks the scope${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`,
      `every /v1 route needs ${requiredScopes.join(" and ")}`,
    );
  const wait = deps.rateLimiter.take(principal.workspaceId);
  if (wait > 0) throw rateLimited("too many requests for this workspace", wait);
  return principal;
}

export function principalOf(req: FastifyRequest): Principal {
  const p = (req as FastifyRequest & { principal?: Principal }).principal;
  if (!p) throw new ServiceError("unauthorized", "missing bearer token", "send Authorization: Bearer <token>");
  return p;
}

/** The request of a creation, for its Idempotency-Key record (see createOnce). */
export function creationRequest(req: FastifyRequest, body: unknown): CreationRequest {
  return {
    workspaceId: principalOf(req).workspaceId,
    idempotencyKey: req.headers["idempotency-key"],
    method: req.method,
    path: req.url.split("?")[0] ?? req.url,
    body,
  };
}

/** Sends a creation's response; a replay says so in a header. */
export function sendCreation(reply: FastifyReply, creation: Creation): unknown {
  if (creation.replayed) reply.header("idempotent-replayed", "true");
  reply.code(creation.status);
  return creation.body;
}
