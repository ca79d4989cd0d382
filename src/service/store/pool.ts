import pg from "pg";

// timestamptz comes back as Date (ms precision is enough for output; cursors use text from SQL).
export function createPool(
  url: string,
  max = 10,
  options: { lockTimeoutMs?: number; deadPeerSeconds?: number } = {},
): pg.Pool {
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
  if (options.deadPeerSeconds) {
    // The server probes an idle session's peer and ends the session once it stops answering. Without this, a client
    // whose machine vanished (no FIN, no RST: a node lost, a network cut) keeps its session, and what the session
    // holds (a job's row lock), for the operating system's default of more than two hours. Queued before any query
    // of the caller's; ignored on a Unix socket.
    const idle = Math.max(1, Math.round(options.deadPeerSeconds / 3));
    const count = 4;
    const interval = Math.max(1, Math.floor((options.deadPeerSeconds - idle) / count));
    pool.on("connect", (client) => {
      client
        .query(
          "SELECT set_config('tcp_keepalives_idle', $1, false), set_config('tcp_keepalives_interval', $2, false), set_config('tcp_keepalives_count', $3, false)",
          [String(idle), String(interval), String(count)],
        )
        .catch(() => {});
    });
  }
  return pool;
}

// Type-only mark of a client lent by withClient: inTransaction accepts no other client, so every transaction's client
// is one that a failure discards.
declare const lent: unique symbol;
export type LentClient = pg.PoolClient & { readonly [lent]: true };

/**
 * Lends `fn` one client of the pool, for work that needs one session across statements (a session lock, several
 * transactions in a row). A client is discarded, not returned to the pool, when `fn` failed: after a lost connection
 * or a failed ROLLBACK it could hand the next caller a session still inside a broken transaction or holding a lock.
 */
export async function withClient<T>(pool: pg.Pool, fn: (client: LentClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return await fn(client as LentClient);
  } catch (err) {
    broken = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * Runs `fn` in one transaction: the only code that writes BEGIN, COMMIT and ROLLBACK (SAVEPOINTs inside `fn` are fine).
 * Given a pool, on a client of its own, discarded if the transaction failed. Given a client lent by withClient (work
 * that spans transactions on one session), on that session: a failure reaches withClient, which discards it. A caller
 * that catches the failure and goes on with the session relies on the ROLLBACK; had that failed, the connection is
 * gone, so the next statement fails too.
 */
export async function inTransaction<T>(db: pg.Pool | LentClient, fn: (client: LentClient) => Promise<T>): Promise<T> {
  if (db instanceof pg.Pool) return withClient(db, (client) => inTransaction(client, fn));
  try {
    await db.query("BEGIN");
    const result = await fn(db);
    await db.query("COMMIT");
    return result;
  } catch (err) {
    await db.query("ROLLBACK").catch(() => {});
    throw err;
  }
}

export type Queryable = Pick<pg.Pool, "query">;
