import { request, type Dispatcher } from "undici";
import { z } from "zod";
import type { Clock } from "./clock.ts";
import {
  ContractViolationError,
  MdsApiError,
  NetworkError,
  TimeoutError,
  UnauthorizedError,
  UnavailableError,
  AbortedError,
} from "./errors.ts";
import type { TokenSource } from "./token-source.ts";

export interface OAuthOptions {
  /** The token endpoint, e.g. `https://mds.example/oauth/token`. */
  tokenUrl: string;
  clientId: string;
  clientSecret?: string;
  /** The current refresh token. Refresh tokens are single-use: each refresh returns a new one. */
  refreshToken: string;
  /**
   * Receives every rotated refresh token; persist it (e.g. into a Secret) or the next process
   * start holds a spent one. Awaited before the new access token is used; a rejection fails the
   * call that triggered the refresh with `internal_error` (the new tokens are kept in memory, so
   * the next call works).
   */
  onRefreshToken(newRefreshToken: string): void | Promise<void>;
}

const TokenResponse = z.object({
  access_token: z.string().min(1),
  token_type: z.string().optional(),
  expires_in: z.number().positive().optional(),
  refresh_token: z.string().min(1).optional(),
  scope: z.string().optional(),
});

// RFC 6749 §5.2 errors, or the contract's error body (what our service sends).
const OAuthErrorBody = z.union([
  z.object({ error: z.string(), error_description: z.string().optional() }),
  z.object({ error: z.object({ code: z.string(), message: z.string() }) }),
]);

// Without `expires_in` we assume the contract's default lifetime.
const defaultLifetimeMs = 3_600_000;

interface OAuthDeps {
  dispatcher: Dispatcher | undefined;
  clock: Clock;
  timeoutMs: number;
}

/**
 * Access tokens from a refresh token: refreshed before they expire, one refresh at a time
 * however many callers wait. A refresh is never retried automatically: if its response was
 * lost, repeating it would reuse a spent refresh token, which revokes the whole chain.
 */
export function oauthTokenSource(options: OAuthOptions, deps: OAuthDeps): TokenSource {
  let refreshToken = options.refreshToken;
  let access: { token: string; refreshAt: number } | undefined;
  let inflight: Promise<string> | undefined;

  async function refresh(): Promise<string> {
    const form = new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: refreshToken,
      client_id: options.clientId,
    });
    if (options.clientSecret !== undefined) form.set("client_secret", options.clientSecret);
    const what = "cannot refresh the access token";
    const timeout = AbortSignal.timeout(deps.timeoutMs);
    let status: number;
    let text: string;
    try {
      const response = await request(options.tokenUrl, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: form.toString(),
        signal: timeout,
        ...(deps.dispatcher === undefined ? {} : { dispatcher: deps.dispatcher }),
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      if (timeout.aborted)
        throw new TimeoutError(`${what}: timeout: no response within ${deps.timeoutMs} ms`, {
          code: "timeout",
          retryable: true,
          cause: error,
        });
      const code = error instanceof Error && "code" in error ? String(error.code) : "unknown";
      throw new NetworkError(`${what}: network_error: ${code}`, {
        code: "network_error",
        retryable: true,
        cause: error,
      });
    }
    const json = parseJson(text);
    if (status >= 200 && status < 300) {
      const parsed = TokenResponse.safeParse(json);
      if (!parsed.success) {
        throw new ContractViolationError(
          `${what}: contract_violation: the token response is not an OAuth token response`,
          {
            code: "contract_violation",
            status,
          },
        );
      }
      const lifetime = (parsed.data.expires_in ?? defaultLifetimeMs / 1000) * 1000;
      // Refresh ahead of expiry: a minute early, or halfway for short-lived tokens.
      access = {
        token: parsed.data.access_token,
        refreshAt: deps.clock.now() + lifetime - Math.min(60_000, lifetime / 2),
      };
      const rotated = parsed.data.refresh_token;
      if (rotated !== undefined && rotated !== refreshToken) {
        refreshToken = rotated;
        try {
          await options.onRefreshToken(rotated);
        } catch (error) {
          // The new tokens stay in memory, so the next call works; this one reports the lost write.
          throw new MdsApiError(
            `${what}: internal_error: onRefreshToken failed: ${error instanceof Error ? error.message : String(error)}`,
            {
              code: "internal_error",
              retryable: true,
              cause: error,
            },
          );
        }
      }
      return parsed.data.access_token;
    }
    const oauthError = OAuthErrorBody.safeParse(json);
    let detail = describeOAuthError(oauthError.success ? oauthError.data : undefined, status);
    for (const secret of [refreshToken, options.clientSecret]) {
      if (secret !== undefined && secret.length >= 4) detail = detail.split(secret).join("[redacted]");
    }
    if (status >= 500 || status === 429) {
      throw new UnavailableError(`${what}: unavailable: ${detail}`, { code: "unavailable", status, retryable: true });
    }
    throw new UnauthorizedError(`${what}: unauthorized: ${detail}`, { code: "unauthorized", status });
  }

  function refreshOnce(): Promise<string> {
    inflight ??= refresh().finally(() => {
      inflight = undefined;
    });
    return inflight;
  }

  async function waitFor(promise: Promise<string>, signal: AbortSignal | undefined): Promise<string> {
    if (signal === undefined) return promise;
    // The shared refresh keeps going for the other callers; only this caller stops waiting.
    return new Promise<string>((resolve, reject) => {
      const onAbort = (): void =>
        reject(new AbortedError("cannot get an access token: aborted", { code: "aborted", cause: signal.reason }));
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener("abort", onAbort, { once: true });
      promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  return {
    identity: `oauth:${options.tokenUrl}:${options.clientId}`,
    async getToken(signal) {
      if (access !== undefined && deps.clock.now() < access.refreshAt) return access.token;
      return waitFor(refreshOnce(), signal);
    },
    async renew(rejected, signal) {
      // Another caller may already have replaced the rejected token.
      if (access !== undefined && access.token !== rejected && deps.clock.now() < access.refreshAt) return true;
      if (inflight === undefined) access = undefined;
      await waitFor(refreshOnce(), signal);
      return true;
    },
  };
}

function describeOAuthError(body: z.infer<typeof OAuthErrorBody> | undefined, status: number): string {
  if (body === undefined) return `HTTP ${status}`;
  if (typeof body.error !== "string") return `${body.error.code}: ${body.error.message}`;
  return "error_description" in body && body.error_description !== undefined
    ? `${body.error}: ${body.error_description}`
    : body.error;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
