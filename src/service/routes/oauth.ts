import type { FastifyInstance, FastifyRequest } from "fastify";
import type pg from "pg";
import { hashToken, randomSecret } from "../crypto.ts";
import type { ServiceDeps } from "../deps.ts";
import { echo, invalidRequest, ServiceError } from "../errors.ts";
import { takeAuthAttempt } from "../http.ts";
import { inTransaction } from "../store/pool.ts";
import { newTokenId } from "../tokens.ts";

// POST /oauth/token (CONTRACT §9): client_credentials (client_id = a service token's id, client_secret = the token)
// and refresh_token with rotation; presenting a spent refresh token revokes its whole chain.

function formOf(req: FastifyRequest): URLSearchParams {
  const type = req.headers["content-type"] ?? "";
  const raw = Buffer.isBuffer(req.body) ? req.body.toString("utf8") : "";
  if (/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) return new URLSearchParams(raw);
  if (/^application\/json\s*(;|$)/i.test(type)) {
    try {
      const value = JSON.parse(raw) as unknown;
      if (value && typeof value === "object" && !Array.isArray(value)) {
        return new URLSearchParams(Object.entries(value as Record<string, unknown>).filter(([, v]) => typeof v === "string") as [string, string][]);
      }
    } catch {
      // fall through
    }
  }
  throw invalidRequest("token requests must be application/x-www-form-urlencoded", "send grant_type and its parameters as a form");
}

/** RFC 6749 §2.3.1: form-urlencoded id and secret inside HTTP Basic. A malformed escape (`%zz`) is the caller's error. */
function basicCredentials(encoded: string): { clientId: string; clientSecret: string } {
  const [id, ...secret] = Buffer.from(encoded, "base64").toString("utf8").split(":");
  try {
    return { clientId: decodeURIComponent(id ?? ""), clientSecret: decodeURIComponent(secret.join(":")) };
  } catch {
    throw invalidRequest("malformed HTTP Basic credentials: a percent-escape is invalid", "percent-encode client_id and client_secret, or send them in the form");
  }
}

const badGrant = (message: string) => new ServiceError("unauthorized", message, "authenticate again with client_credentials");

async function issue(deps: ServiceDeps, client: pg.PoolClient, input: { workspaceId: string; scopes: string[]; parentId: string; chainId: string }) {
  const access = `mds_at_${randomSecret(32)}`;
  const refresh = `mds_rt_${randomSecret(32)}`;
  const ttl = deps.config.accessTokenTtlSeconds;
  await client.query(
    `INSERT INTO tokens (id, workspace_id, kind, hash, scopes, parent_id, chain_id, expires_at)
     VALUES ($1, $2, 'access', $3, $4, $5, $6, now() + $7 * interval '1 second'),
            ($8, $2, 'refresh', $9, $4, $5, $6, NULL)`,
    [newTokenId(), input.workspaceId, hashToken(access), input.scopes, input.parentId, input.chainId, ttl, newTokenId(), hashToken(refresh)],
  );
  return { access_token: access, token_type: "Bearer" as const, expires_in: ttl, refresh_token: refresh, scope: input.scopes.join(" ") };
}

export function oauthRoutes(app: FastifyInstance, deps: ServiceDeps): void {
  app.post("/oauth/token", async (req, reply) => {
    takeAuthAttempt(deps, req);
    const form = formOf(req);
    let clientId = form.get("client_id");
    let clientSecret = form.get("client_secret");
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "");
    if (basic) ({ clientId, clientSecret } = basicCredentials(basic[1]!));
    const grant = form.get("grant_type");
    reply.header("cache-control", "no-store");
    if (grant === "client_credentials") {
      if (!clientId || !clientSecret) throw invalidRequest("client_credentials needs client_id and client_secret", "client_id is the service token's id, client_secret the token");
      return inTransaction(deps.pool, async (client) => {
        const { rows } = await client.query<{ id: string; workspace_id: string; scopes: string[] }>(
          "SELECT id, workspace_id, scopes FROM tokens WHERE id = $1 AND hash = $2 AND kind = 'service' AND revoked_at IS NULL",
          [clientId, hashToken(clientSecret)],
        );
        const parent = rows[0];
        if (!parent) throw new ServiceError("unauthorized", "invalid client credentials", "client_id is the service token's id (mds token list), client_secret the token");
        const requested = form.get("scope")?.split(" ").filter(Boolean);
        const scopes = requested ? requested.filter((s) => parent.scopes.includes(s)) : parent.scopes;
        return issue(deps, client, { workspaceId: parent.workspace_id, scopes, parentId: parent.id, chainId: newTokenId() });
      });
    }
    if (grant === "refresh_token") {
      const token = form.get("refresh_token");
      if (!token) throw invalidRequest("refresh_token grant needs refresh_token", "pass the refresh_token of the last token response");
      const outcome = await inTransaction(deps.pool, async (client) => {
        const { rows } = await client.query<{ id: string; workspace_id: string; scopes: string[]; parent_id: string; chain_id: string; used_at: Date | null; revoked_at: Date | null; parent_revoked: Date | null }>(
          `SELECT t.id, t.workspace_id, t.scopes, t.parent_id, t.chain_id, t.used_at, t.revoked_at, p.revoked_at AS parent_revoked
           FROM tokens t JOIN tokens p ON p.id = t.parent_id WHERE t.hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t`,
          [hashToken(token)],
        );
        const row = rows[0];
        if (!row || row.revoked_at || row.parent_revoked) return { error: "invalid or revoked refresh token" };
        if (row.used_at) {
          // Reuse of a spent refresh token means it leaked: cut off everything issued in its chain.
          await client.query("UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE chain_id = $1", [row.chain_id]);
          return { error: "refresh token already used: every token of its chain is now revoked" };
        }
        await client.query("UPDATE tokens SET used_at = now() WHERE id = $1", [row.id]);
        return { tokens: await issue(deps, client, { workspaceId: row.workspace_id, scopes: row.scopes, parentId: row.parent_id, chainId: row.chain_id }) };
      });
      // The revocation must commit before we answer with an error.
      if ("error" in outcome) throw badGrant(outcome.error!);
      return outcome.tokens;
    }
    throw invalidRequest(`unsupported grant_type ${echo(grant ?? "")}`, "use client_credentials or refresh_token");
  });
}
