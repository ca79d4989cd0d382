import pg from "pg";

// timestamptz comes back as Date (ms precision is enough for output; cursors use text from SQL).
export function createPool(url: string, max = 10, options: { lockTimeoutMs?: number } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    ...(options.lockTimeoutMs ? { lock_timeout: options.lockTimeoutMs } : {}),
  });
  // A client losing its server (idle or checked out) must not crash the process: the pending query rejects,
  // and the broken client is discarded on release.
  pool.on("error", () => {});
  pool.on("connect", (client) => client.on("error", () => {}));
  return pool;
}

/**
 * Runs `fn` in one transaction. A client whose transaction failed is discarded, not returned to the pool: after a
 * lost connection or a failed ROLLBACK it could hand the next caller a session still inside a broken transaction.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    broken = err instanceof Error ? err : new Error(String(err));
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    client.release(broken);
  }
}

export type Queryable = Pick<pg.Pool, "query">;
