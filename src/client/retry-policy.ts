// When to retry and how long to wait. Defaults follow undici's RetryHandler (500 ms doubling
// to 30 s, statuses 429/500/502/503/504, the same network error codes), with full jitter
// (AWS "Exponential Backoff and Jitter") so callers that failed together do not return together.

export interface RetryOptions {
  /** Attempts per call, the first included. Default 5. */
  maxAttempts?: number;
  /** Backoff ceiling of the first retry, doubled each retry. Default 500 ms. */
  minDelayMs?: number;
  /** Largest backoff ceiling. Default 30 s. */
  maxDelayMs?: number;
  /** No retry starts once this much time has passed since the call began. Default 60 s. */
  maxElapsedMs?: number;
}

export type RetryPolicy = Required<RetryOptions>;

export const defaultRetryPolicy: RetryPolicy = {
  maxAttempts: 5,
  minDelayMs: 500,
  maxDelayMs: 30_000,
  maxElapsedMs: 60_000,
};

export function resolveRetryPolicy(options: RetryOptions | undefined): RetryPolicy {
  const policy = { ...defaultRetryPolicy };
  for (const key of Object.keys(policy) as (keyof RetryPolicy)[]) {
    const value = options?.[key];
    if (value === undefined) continue;
    if (!Number.isFinite(value) || value < 0 || (key === "maxAttempts" && (value < 1 || !Number.isInteger(value)))) {
      throw new TypeError(`invalid client option retry.${key}: ${String(value)}`);
    }
    policy[key] = value;
  }
  return policy;
}

export const retryableStatuses: ReadonlySet<number> = new Set([429, 500, 502, 503, 504]);

export const retryableNetworkCodes: ReadonlySet<string> = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ENOTFOUND",
  "ENETDOWN",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EHOSTUNREACH",
  "EPIPE",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED",
]);

/** Failures that prove the request never reached the server: the connection was never made. */
const notSentNetworkCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENETDOWN",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EHOSTUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * A request may be repeated when repeating cannot act twice. GET, PATCH and DELETE converge; a POST only when the
 * server has announced that it replays its Idempotency-Key (`replayAnnounced`, our service does; the public API
 * ignores the key) or when the failure proves the server did not act: a 429, or a connection never made.
 */
export function mayRepeat(
  method: string,
  idempotencyKey: string | undefined,
  replayAnnounced: boolean,
  failure: { status?: number | undefined; networkCode?: string | undefined },
): boolean {
  if (method !== "POST") return true;
  if (idempotencyKey !== undefined && replayAnnounced) return true;
  return failure.status === 429 || (failure.networkCode !== undefined && notSentNetworkCodes.has(failure.networkCode));
}

/** Full jitter: uniform in [0, min(maxDelay, minDelay * 2^(retry-1))). `retry` counts from 1. */
export function computeBackoff(retry: number, policy: RetryPolicy, random: () => number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(random() * ceiling);
}
