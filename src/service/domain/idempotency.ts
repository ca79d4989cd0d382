import type pg from "pg";
import { idempotencyReplayHeader } from "../../contract/index.ts";
import { decrypt, encrypt, sha256Hex } from "../shared/crypto.ts";
import type { ServiceDeps } from "../runtime/deps.ts";
import { invalidRequest, unprocessable } from "../shared/errors.ts";
import { inTransaction } from "../store/pool.ts";

export type StoredResponse = { status: number; body: unknown };

/** What a creation's Idempotency-Key record needs of its request (taken as sent; checked when the creation runs). */
export type CreationRequest = {
  workspaceId: string;
  idempotencyKey: string | string[] | undefined;
  method: string;
  path: string;
  body: unknown;
};
/** A creation's response, and whether it is the stored one of an earlier request with the same key. */
export type Creation = StoredResponse & { replayed: boolean };

const creationTtlHours = 24;
// A restore destroys data: its key is honoured far longer than the 24 h promised, so a late retry never runs it twice.
const restoreTtlHours = 24 * 30;

/** Sent on every /v1 response: this service replays a POST's Idempotency-Key for this many seconds (clients re-send only then). */
export const replayAnnouncement = { header: idempotencyReplayHeader, value: String(creationTtlHours * 3600) } as const;

export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header[0] : header;
  if (key === undefined || !/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw invalidRequest("invalid Idempotency-Key header", "use 1-255 printable ASCII characters without spaces");
  }
  return key;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function requestHash(method: string, path: string, body: unknown): string {
  return sha256Hex(`${method} ${path}\n${canonical(body)}`);
}

/**
 * Runs inside the creation's transaction: takes the key's lock (a concurrent duplicate waits, then replays),
 * and returns the stored response if there is one. Same key with another request is 422.
 */
async function lookupIdempotent(
  client: pg.PoolClient,
  key: Buffer,
  input: { workspaceId: string; key: string; hash: string },
): Promise<StoredResponse | undefined> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`${input.workspaceId}\n${input.key}`]);
  const { rows } = await client.query<{ request_hash: string; status: number; response: Buffer }>(
    "SELECT request_hash, status, response FROM idempotency WHERE workspace_id = $1 AND key = $2 AND expires_at > now()",
    [input.workspaceId, input.key],
  );
  const row = rows[0];
  if (!row) return undefined;
  if (row.request_hash !== input.hash) {
    throw unprocessable(
      `Idempotency-Key "${input.key}" was already used for a different request`,
      "use a new key for a different request body or path",
    );
  }
  return { status: row.status, body: JSON.parse(decrypt(key, row.response)) };
}

async function storeIdempotent(
  client: pg.PoolClient,
  key: Buffer,
  input: { workspaceId: string; key: string; hash: string; response: StoredResponse; restore?: boolean },
): Promise<void> {
  await client.query(
    `INSERT INTO idempotency (workspace_id, key, request_hash, status, response, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 hour')
     ON CONFLICT (workspace_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status = EXCLUDED.status,
       response = EXCLUDED.response, created_at = now(), expires_at = EXCLUDED.expires_at`,
    [
      input.workspaceId,
      input.key,
      input.hash,
      input.response.status,
      encrypt(key, JSON.stringify(input.response.body)),
      input.restore ? restoreTtlHours : creationTtlHours,
    ],
  );
}

/**
 * Runs a creation in one transaction with its Idempotency-Key record: the same key and request replay the stored
 * response (credentials included) without acting again. `op` returns the response as the client sees it, since that
 * is what a replay must return; jobs it enqueued are woken once it committed.
 */
export async function createOnce(
  deps: ServiceDeps,
  request: CreationRequest,
  op: (client: pg.PoolClient) => Promise<StoredResponse>,
  options: { restore?: boolean } = {},
): Promise<Creation> {
  const { workspaceId } = request;
  const key = parseIdempotencyKey(request.idempotencyKey);
  const hash = requestHash(request.method, request.path, request.body);
  const result = await inTransaction(deps.pool, async (client) => {
    if (key) {
      const stored = await lookupIdempotent(client, deps.config.encryptionKey, { workspaceId, key, hash });
      if (stored) return { ...stored, replayed: true };
    }
    const response = await op(client);
    if (key)
      await storeIdempotent(client, deps.config.encryptionKey, {
        workspaceId,
        key,
        hash,
        response,
        ...(options.restore ? { restore: true } : {}),
      });
    return { ...response, replayed: false };
  });
  if (!result.replayed) deps.wakeJobs();
  return result;
}
