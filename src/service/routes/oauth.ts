import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ServiceDeps } from "../runtime/deps.ts";
import { grantClientCredentials, grantRefreshToken, type IssuedTokens } from "../domain/oauth.ts";
import { echo, invalidRequest } from "../shared/errors.ts";
import { takeAuthAttempt } from "../http/request.ts";
import { checkJsonStrings, checkPairs, utf8Body } from "../http/text.ts";

// POST /oauth/token (docs/decisions.md#authentication): client_credentials (client_id = a service token's id, client_secret = the token)
// and refresh_token with rotation (domain/oauth.ts). Every request counts against the budget of its address and secret.

function formOf(req: FastifyRequest): URLSearchParams {
  const type = req.headers["content-type"] ?? "";
  const raw = Buffer.isBuffer(req.body) ? utf8Body(req.body) : "";
  if (/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) {
    // Checked as sent: URLSearchParams would quietly turn a bad escape into U+FFFD.
    checkPairs(raw, "field");
    return new URLSearchParams(raw);
  }
  if (/^application\/json\s*(;|$)/i.test(type)) {
    let value: unknown;
    try {
      value = JSON.parse(raw) as unknown;
    } catch {
      value = undefined;
    }
    if (value && typeof value === "object" && !Array.isArray(value)) {
      checkJsonStrings(value);
      return new URLSearchParams(
        Object.entries(value as Record<string, unknown>).filter(([, v]) => typeof v === "string") as [string, string][],
      );
    }
  }
  throw invalidRequest(
    "token requests must be application/x-www-form-urlencoded",
    "send grant_type and its parameters as a form",
  );
}

/** RFC 6749 §2.3.1: form-urlencoded id and secret inside HTTP Basic. A malformed escape (`%zz`) is the caller's error. */
function basicCredentials(encoded: string): { clientId: string; clientSecret: string } {
  const [id, ...secret] = Buffer.from(encoded, "base64").toString("utf8").split(":");
  try {
    return { clientId: decodeURIComponent(id ?? ""), clientSecret: decodeURIComponent(secret.join(":")) };
  } catch {
    throw invalidRequest(
      "malformed HTTP Basic credentials: a percent-escape is invalid",
      "percent-encode client_id and client_secret, or send them in the form",
    );
  }
}

/** RFC 6749 §5.1: the token response. */
const renderTokens = (t: IssuedTokens) => ({
  access_token: t.accessToken,
  token_type: "Bearer" as const,
  expires_in: t.expiresIn,
  refresh_token: t.refreshToken,
  scope: t.scopes.join(" "),
});

export function oauthRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.post("/oauth/token", async (req, reply) => {
    const form = formOf(req);
    let clientId = form.get("client_id");
    let clientSecret = form.get("client_secret");
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "");
    if (basic) ({ clientId, clientSecret } = basicCredentials(basic[1]!));
    // The same check as every other request's strings (http/text.ts), before any of them is looked up.
    checkJsonStrings({
      ...Object.fromEntries(form),
      ...(basic ? { client_id: clientId, client_secret: clientSecret } : {}),
    });
    const grant = form.get("grant_type");
    // Counted per address and secret (http/request.ts, attemptKey): a neighbour's bad secret never spends this one's budget.
    takeAuthAttempt(deps, req, (grant === "refresh_token" ? form.get("refresh_token") : clientSecret) ?? "");
    reply.header("cache-control", "no-store");
    if (grant === "client_credentials") {
      if (!clientId || !clientSecret)
        throw invalidRequest(
          "client_credentials needs client_id and client_secret",
          "client_id is the service token's id, client_secret the token",
        );
      const scopes = form.get("scope")?.split(" ").filter(Boolean);
      return renderTokens(await grantClientCredentials(deps, { clientId, clientSecret, scopes }));
    }
    if (grant === "refresh_token") {
      const token = form.get("refresh_token");
      if (!token)
        throw invalidRequest(
          "refresh_token grant needs refresh_token",
          "pass the refresh_token of the last token response",
        );
      return renderTokens(await grantRefreshToken(deps, token));
    }
    throw invalidRequest(`unsupported grant_type ${echo(grant ?? "")}`, "use client_credentials or refresh_token");
  });
}
