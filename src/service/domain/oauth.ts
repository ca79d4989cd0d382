import type pg from "pg";
import { hashToken, randomSecret } from "../shared/crypto.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { ServiceError } from "../shared/errors.ts";
import { inTransaction } from "../store/pool.ts";
import { newTokenId } from "./tokens.ts";

// The OAuth grants of POST /oauth/token (docs/decisions.md#authentication). An access token lasts `accessTokenTtlSeconds`; its refresh
// token is single-use, and presenting a spent one revokes its whole chain. Both are stored only hashed.

/** A token pair just issued: the tokens exist only here and in the response. */
export type IssuedTokens = { accessToken: string; refreshToken: string; expiresIn: number; scopes: string[] };

const badGrant = (message: string) =>
  new ServiceError("unauthorized", message, "authenticate again with client_credentials");

async function issue(
  deps: ServiceDeps,
  client: pg.PoolClient,
  input: { workspaceId: string; scopes: string[]; parentId: string; chainId: string },
): Promise<IssuedTokens> {
  const access = `mds_at_${randomSecret(32)}`;
  const refresh = `mds_rt_${randomSecret(32)}`;
  const ttl = deps.config.accessTokenTtlSeconds;
  await client.query(
    `INSERT INTO tokens (id, workspace_id, kind, hash, scopes, parent_id, chain_id, expires_at)
     VALUES ($1, $2, 'access', $3, $4, $5, $6, now() + $7 * interval '1 second'),
            ($8, $2, 'refresh', $9, $4, $5, $6, NULL)`,
    [
      newTokenId(),
      input.workspaceId,
      hashToken(access),
      input.scopes,
      input.parentId,
      input.chainId,
      ttl,
      newTokenId(),
      hashToken(refresh),
    ],
  );
  return { accessToken: access, refreshToken: refresh, expiresIn: ttl, scopes: input.scopes };
}

/** client_credentials: `clientId` is a service token's id, `clientSecret` the token; scopes are at most the token's. */
export async function grantClientCredentials(
  deps: ServiceDeps,
  input: { clientId: string; clientSecret: string; scopes: string[] | undefined },
): Promise<IssuedTokens> {
  return inTransaction(deps.pool, async (client) => {
    const { rows } = await client.query<{ id: string; workspace_id: string; scopes: string[] }>(
      "SELECT id, workspace_id, scopes FROM tokens WHERE id = $1 AND hash = $2 AND kind = 'service' AND revoked_at IS NULL",
      [input.clientId, hashToken(input.clientSecret)],
    );
    const parent = rows[0];
    if (!parent)
      throw new ServiceError(
        "unauthorized",
        "invalid client credentials",
        "client_id is the service token's id (mds token list), client_secret the token",
      );
    const scopes = input.scopes ? input.scopes.filter((s) => parent.scopes.includes(s)) : parent.scopes;
    return issue(deps, client, {
      workspaceId: parent.workspace_id,
      scopes,
      parentId: parent.id,
      chainId: newTokenId(),
    });
  });
}

/** refresh_token: spends the refresh token for a new pair in the same chain. */
export async function grantRefreshToken(deps: ServiceDeps, refreshToken: string): Promise<IssuedTokens> {
  const outcome = await inTransaction(deps.pool, async (client) => {
    const { rows } = await client.query<{
      id: string;
      workspace_id: string;
      scopes: string[];
      parent_id: string;
      chain_id: string;
      used_at: Date | null;
      revoked_at: Date | null;
      parent_revoked: Date | null;
    }>(
      `SELECT t.id, t.workspace_id, t.scopes, t.parent_id, t.chain_id, t.used_at, t.revoked_at, p.revoked_at AS parent_revoked
       FROM tokens t JOIN tokens p ON p.id = t.parent_id WHERE t.hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t`,
      [hashToken(refreshToken)],
    );
    const row = rows[0];
    if (!row || row.revoked_at || row.parent_revoked) return { error: "invalid or revoked refresh token" };
    if (row.used_at) {
      // Reuse of a spent refresh token means it leaked: cut off everything issued in its chain.
      await client.query("UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE chain_id = $1", [
        row.chain_id,
      ]);
      return { error: "refresh token already used: every token of its chain is now revoked" };
    }
    await client.query("UPDATE tokens SET used_at = now() WHERE id = $1", [row.id]);
    return {
      tokens: await issue(deps, client, {
        workspaceId: row.workspace_id,
        scopes: row.scopes,
        parentId: row.parent_id,
        chainId: row.chain_id,
      }),
    };
  });
  // The revocation must commit before we answer with an error.
  if ("error" in outcome) throw badGrant(outcome.error!);
  return outcome.tokens;
}
