import { randomBytes } from "node:crypto";
import type pg from "pg";
import { newId } from "../../contract/index.ts";
import { hashToken, randomSecret } from "../shared/crypto.ts";

export const requiredScopes = ["workspace:admin", "offline_access"] as const;
export const defaultScopes: string[] = [...requiredScopes];

export type Principal = { tokenId: string; workspaceId: string; workspaceName: string; scopes: string[] };
export type TokenInfo = {
  id: string;
  workspace: string;
  name: string;
  scopes: string[];
  createdAt: string;
  revoked: boolean;
};

type Db = Pick<pg.Pool, "query">;

export function newTokenId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let body = "c";
  for (const b of randomBytes(24)) body += alphabet[b % alphabet.length];
  return `tok_${body}`;
}

/** Creates the workspace if needed; returns its id. */
export async function ensureWorkspace(db: Db, name: string): Promise<{ id: string; name: string }> {
  const { rows } = await db.query<{ id: string; name: string }>(
    `INSERT INTO workspaces (id, name) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id, name`,
    [newId("workspace"), name],
  );
  return rows[0]!;
}

/** A new service token of the workspace (created if needed). The token itself is returned once and stored only hashed. */
export async function createServiceToken(
  db: Db,
  input: { workspace: string; scopes?: string[]; name?: string },
): Promise<{ id: string; token: string; workspaceId: string }> {
  const workspace = await ensureWorkspace(db, input.workspace);
  const token = `mds_${randomSecret(32)}`;
  const id = newTokenId();
  await db.query(
    "INSERT INTO tokens (id, workspace_id, kind, name, hash, scopes) VALUES ($1, $2, 'service', $3, $4, $5)",
    [id, workspace.id, input.name ?? "", hashToken(token), input.scopes ?? defaultScopes],
  );
  return { id, token, workspaceId: workspace.id };
}

export async function listServiceTokens(db: Db, workspace?: string): Promise<TokenInfo[]> {
  const { rows } = await db.query<{
    id: string;
    workspace: string;
    name: string;
    scopes: string[];
    created_at: Date;
    revoked_at: Date | null;
  }>(
    `SELECT t.id, w.name AS workspace, t.name, t.scopes, t.created_at, t.revoked_at FROM tokens t JOIN workspaces w ON w.id = t.workspace_id
     WHERE t.kind = 'service' AND ($1::text IS NULL OR w.name = $1) ORDER BY t.created_at, t.id`,
    [workspace ?? null],
  );
  return rows.map((r) => ({
    id: r.id,
    workspace: r.workspace,
    name: r.name,
    scopes: r.scopes,
    createdAt: r.created_at.toISOString(),
    revoked: r.revoked_at !== null,
  }));
}

/** Revokes a service token and every OAuth token issued through it. Returns false if there is no such token. */
export async function revokeToken(db: Db, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    "UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 OR parent_id = $1",
    [id],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * The principal of a bearer token, or undefined if it is unknown, expired or revoked (itself or the service token
 * it was issued through). Refresh tokens never authenticate API calls.
 */
export async function findPrincipal(db: Db, token: string): Promise<Principal | undefined> {
  if (!tokenShape.test(token)) return undefined;
  const hash = hashToken(token);
  const refused = refusedTokens(db);
  if (refused.has(hash.toString("base64url"))) return undefined;
  const { rows } = await db.query<{ id: string; workspace_id: string; workspace_name: string; scopes: string[] }>(
    `SELECT t.id, t.workspace_id, w.name AS workspace_name, t.scopes FROM tokens t
       JOIN workspaces w ON w.id = t.workspace_id
       LEFT JOIN tokens p ON p.id = t.parent_id
     WHERE t.hash = $1 AND t.kind IN ('service', 'access') AND t.revoked_at IS NULL
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND (t.parent_id IS NULL OR p.revoked_at IS NULL)`,
    [hash],
  );
  const row = rows[0];
  if (!row) remember(refused, hash.toString("base64url"));
  return row
    ? { tokenId: row.id, workspaceId: row.workspace_id, workspaceName: row.workspace_name, scopes: row.scopes }
    : undefined;
}

/**
 * What every token the service issues looks like: "mds_" (service) or "mds_at_" (access) and 32 random bytes in
 * base64url (createServiceToken, domain/oauth.ts). Anything else is refused without a query.
 */
const tokenShape = /^mds_(?:at_)?[A-Za-z0-9_-]{43}$/;

/**
 * Hashes of tokens found invalid, per control database: a token that is unknown, revoked or expired never becomes
 * valid again (tokens are random, revocation and expiry are final), so a bad token looping through the operator is
 * looked up once, not on every request. Bounded; the oldest entries go first.
 */
const refusedByDb = new WeakMap<Db, Set<string>>();
const maxRefused = 10_000;

function refusedTokens(db: Db): Set<string> {
  let set = refusedByDb.get(db);
  if (set === undefined) refusedByDb.set(db, (set = new Set()));
  return set;
}

function remember(set: Set<string>, hash: string): void {
  set.add(hash);
  // A Set iterates in insertion order: drop the oldest.
  if (set.size > maxRefused) set.delete(set.values().next().value!);
}
