import pg from "pg";
import { client, type Json } from "../helpers.ts";

// API traffic for the fault tests: every write carries an Idempotency-Key and is sent again, with the same key,
// after an answer that says "retry" (503 with Retry-After) or after the connection to the service broke (a killed
// replica: a load balancer sends the retry to another one). Any other failure is recorded as a violation.

export type Ledger = {
  /** Answers that asked for a retry: 503 `unavailable` with Retry-After. */
  retryable: number;
  /** Requests whose connection to the service broke (only where a replica is killed). */
  broken: number;
  /** Anything else that was not a success: each one breaks the guarantee. */
  violations: string[];
  /** Time of the last retryable failure, for the time to recover. */
  lastFailureAt: number;
};

export function newLedger(): Ledger {
  return { retryable: 0, broken: 0, violations: [], lastFailureAt: 0 };
}

type Options = {
  /** The service URLs to use, round-robin per attempt (two replicas behind one Service). */
  urls: () => string[];
  token: string;
  ledger: Ledger;
  /** A broken connection counts as retryable only when a replica may be killed. */
  brokenIsRetryable?: boolean;
  deadlineMs?: number;
  /** Requests on their way, per URL: a test kills a replica while one of its requests is in flight. */
  inFlight?: Map<string, number>;
};

let turn = 0;

/** Sends the request until it succeeds; returns the successful answer (or the last one, with a violation recorded). */
export async function sendUntilDone(
  options: Options,
  method: string,
  path: string,
  body: unknown,
  key: string | undefined,
): Promise<{ status: number; body: Json }> {
  const { ledger } = options;
  const deadline = Date.now() + (options.deadlineMs ?? 45_000);
  for (;;) {
    const urls = options.urls();
    const url = urls[turn++ % urls.length]!;
    const api = client({ url }, options.token);
    let res;
    const inFlight = options.inFlight;
    inFlight?.set(url, (inFlight.get(url) ?? 0) + 1);
    try {
      res = await api(method, path, body, key ? { "idempotency-key": key } : {});
    } catch (err) {
      if (!options.brokenIsRetryable) {
        ledger.violations.push(`${method} ${path}: the connection broke (${(err as Error).message})`);
        throw err;
      }
      ledger.broken++;
      ledger.lastFailureAt = Date.now();
      if (Date.now() > deadline) throw err;
      continue;
    } finally {
      inFlight?.set(url, inFlight.get(url)! - 1);
    }
    if (res.status < 300) return res;
    if (res.status === 503 && res.body?.error?.code === "unavailable" && Number(res.headers.get("retry-after")) > 0) {
      ledger.retryable++;
      ledger.lastFailureAt = Date.now();
      if (Date.now() > deadline) {
        ledger.violations.push(`${method} ${path}: still 503 after the deadline`);
        return res;
      }
      // Retry-After says 5 s; a client may come back sooner, and the test has no time to wait that long.
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    ledger.violations.push(`${method} ${path}: ${res.status} ${JSON.stringify(res.body?.error ?? res.body)}`);
    return res;
  }
}

/**
 * A tenant writing through its connection string the way any PostgreSQL client does: on a connection error, it
 * reconnects and goes on. Returns every value whose INSERT was acknowledged (COMMIT returned).
 */
export function tenantWriter(connectionString: string, table: string) {
  let stopped = false;
  const acknowledged: number[] = [];
  let reconnects = 0;
  const done = (async () => {
    let next = 0;
    let conn: pg.Client | undefined;
    while (!stopped) {
      try {
        if (!conn) {
          conn = new pg.Client({ connectionString, connectionTimeoutMillis: 2000 });
          conn.on("error", () => {});
          await conn.connect();
        }
        const value = next++;
        await conn.query(`INSERT INTO ${table} VALUES ($1)`, [value]);
        acknowledged.push(value);
      } catch {
        await conn?.end().catch(() => {});
        conn = undefined;
        reconnects++;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await conn?.end().catch(() => {});
  })();
  return {
    acknowledged,
    get reconnects() {
      return reconnects;
    },
    async stop() {
      stopped = true;
      await done;
    },
  };
}
