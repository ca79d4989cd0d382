// Over 400 lines on purpose: one request's whole life (rate budget, auth, timeouts, retries and the POST re-send
// rule, parsing, error typing) in one file, so the retry decisions can be read, and reviewed, in one place.

import { randomUUID } from "node:crypto";
import { request, type Dispatcher } from "undici";
import type { z } from "zod";
import { idempotencyReplayHeader, PublicErrorBody } from "../contract/index.ts";
import type { Clock } from "./clock.ts";
import {
  AbortedError,
  ContractViolationError,
  InvalidRequestError,
  MdsApiError,
  NetworkError,
  TimeoutError,
  codeForStatus,
  createMdsError,
  ServiceErrorCodes,
} from "./errors.ts";
import { callHook, type ClientHooks, type ClientLogger } from "./hooks.ts";
import type { RateBudget } from "./rate-budget.ts";
import { parseRetryAfter } from "./retry-after.ts";
import {
  computeBackoff,
  mayRepeat,
  retryableNetworkCodes,
  retryableStatuses,
  type RetryPolicy,
} from "./retry-policy.ts";
import type { TokenSource } from "./token-source.ts";

type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

interface TransportConfig {
  baseUrl: string;
  tokenSource: TokenSource;
  dispatcher: Dispatcher | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  budget: RateBudget | undefined;
  clock: Clock;
  random: () => number;
  hooks: ClientHooks;
  logger: ClientLogger | undefined;
  userAgent: string;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
  idempotencyKey?: string | undefined;
}

export interface Call<T> {
  /** Client method name, for hooks and logs. */
  operation: string;
  /** What was attempted, for messages: `get database "db_…"`. */
  description: string;
  method: HttpMethod;
  path: string;
  query?: Record<string, string | number | undefined> | undefined;
  body?: unknown;
  /** The response envelope, or the value to return when the body is ignored (DELETE, 204). */
  response: { schema: z.ZodType<T> } | { ignoreBody: T };
  /**
   * Creations: a 409 names the resource that already holds the key; `logicalId` is the key
   * sent, so an id-like part of it is not mistaken for the holder's id.
   */
  conflictNamesExisting?: { logicalId: string | undefined };
}

// The service's rule (and a safe header value).
const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

// A response bigger than this is not one of ours (the largest list page is ~100 databases).
const maxResponseBytes = 16 * 1024 * 1024;

type AttemptResult =
  | { kind: "response"; status: number; headers: Record<string, string | string[] | undefined>; text: string }
  | { kind: "failure"; error: MdsApiError };

export function createTransport(config: TransportConfig) {
  const baseUrl = config.baseUrl.replace(/\/+$/, "");
  /** Sticky: once this server has said it replays Idempotency-Keys (see `mayRepeat`). */
  let replayAnnounced = false;

  async function send<T>(call: Call<T>, options: CallOptions | undefined): Promise<T> {
    const signal = options?.signal;
    const idempotencyKey = options?.idempotencyKey;
    const started = config.clock.now();
    const url = buildUrl(baseUrl, call.path, call.query);
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    let attempts = 0;
    let retries = 0;
    let renewedToken = false;
    let lastStatus: number | undefined;
    const finish = (outcome: string): void =>
      callHook(config.hooks.onRequest, {
        operation: call.operation,
        method: call.method,
        ...(lastStatus === undefined ? {} : { status: lastStatus }),
        outcome,
        attempts,
        durationMs: config.clock.now() - started,
      });

    try {
      if (idempotencyKey !== undefined && !idempotencyKeyPattern.test(idempotencyKey)) {
        throw new InvalidRequestError(
          `cannot ${call.description}: invalid_request: idempotencyKey must be 1-255 printable ASCII characters without spaces`,
          {
            code: "invalid_request",
            operation: call.operation,
          },
        );
      }
      for (;;) {
        throwIfAborted(signal, call);
        if (config.budget !== undefined) {
          const waitedMs = await config.budget.acquire(signal);
          if (waitedMs > 0) callHook(config.hooks.onThrottled, { operation: call.operation, waitedMs });
        }
        const token = await config.tokenSource.getToken(signal);
        attempts += 1;
        const attemptStarted = config.clock.now();
        const result = await attempt(call, url, body, token, idempotencyKey, signal);
        lastStatus = result.kind === "response" ? result.status : undefined;
        if (result.kind === "response" && announcesReplay(result.headers)) replayAnnounced = true;

        let error: MdsApiError;
        if (result.kind === "response" && result.status >= 200 && result.status < 300) {
          const parsed = parseSuccess(call, result, token);
          if (parsed.ok) {
            callHook(config.hooks.onAttempt, {
              operation: call.operation,
              method: call.method,
              attempt: attempts,
              status: result.status,
              outcome: "ok",
              durationMs: config.clock.now() - attemptStarted,
            });
            finish("ok");
            return parsed.value;
          }
          error = parsed.error;
        } else {
          error =
            result.kind === "response" ? errorFromResponse(call, result, token, config.clock.now()) : result.error;
        }
        callHook(config.hooks.onAttempt, {
          operation: call.operation,
          method: call.method,
          attempt: attempts,
          ...(error.status === undefined ? {} : { status: error.status }),
          outcome: error.code,
          durationMs: config.clock.now() - attemptStarted,
        });
        if (error.code === "aborted") throw error;

        // A 401 was not acted on, so even a POST without a key may go once more with a fresh token.
        if (error.status === 401 && !renewedToken) {
          renewedToken = true;
          if (await config.tokenSource.renew(token, signal)) continue;
        }

        const delayMs = error.retryAfterMs ?? computeBackoff(retries + 1, config.retry, config.random);
        if (error.status === 429 && config.budget !== undefined) {
          // Every caller of this credential waits, not only this one.
          config.budget.pauseUntil(config.clock.now() + delayMs);
        }
        const elapsed = config.clock.now() - started;
        const repeatable = mayRepeat(call.method, idempotencyKey, replayAnnounced, {
          status: error.status,
          networkCode: result.kind === "failure" ? errorCode(error.cause) : undefined,
        });
        const mayRetry =
          error.retryable &&
          repeatable &&
          attempts < config.retry.maxAttempts &&
          elapsed + delayMs <= config.retry.maxElapsedMs;
        if (!mayRetry) throw error;

        retries += 1;
        callHook(config.hooks.onRetry, {
          operation: call.operation,
          attempt: attempts,
          outcome: error.code,
          ...(error.status === undefined ? {} : { status: error.status }),
          delayMs,
        });
        config.logger?.debug(
          {
            operation: call.operation,
            attempt: attempts,
            code: error.code,
            status: error.status,
            requestId: error.requestId,
            delayMs,
          },
          "retrying a failed request",
        );
        // After a 429 the budget's pause holds this caller with the others.
        if (!(error.status === 429 && config.budget !== undefined)) await config.clock.sleep(delayMs, signal);
      }
    } catch (caught) {
      const error = normalize(caught, call, signal);
      finish(error.code);
      throw error;
    }
  }

  async function attempt(
    call: Call<unknown>,
    url: string,
    body: string | undefined,
    token: string,
    idempotencyKey: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<AttemptResult> {
    // Real time, not the injected clock: a test clock must not fire timeouts early. The caller's
    // signal is linked by hand and unlinked afterwards, so a process-wide signal gathers no listeners.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), config.timeoutMs);
    const combined = new AbortController();
    const forward = (): void => combined.abort(signal?.reason);
    timeout.signal.addEventListener("abort", forward, { once: true });
    signal?.addEventListener("abort", forward, { once: true });
    if (signal?.aborted) forward();
    const headers: Record<string, string> = {
      authorization: `Bearer ${token}`,
      accept: "application/json",
      "user-agent": config.userAgent,
      "x-request-id": randomUUID(),
    };
    if (body !== undefined) headers["content-type"] = "application/json; charset=utf-8";
    if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
    try {
      const response = await request(url, {
        method: call.method,
        headers,
        ...(body === undefined ? {} : { body }),
        signal: combined.signal,
        ...(config.dispatcher === undefined ? {} : { dispatcher: config.dispatcher }),
      });
      const text = await readBounded(response.body, call.description);
      return { kind: "response", status: response.statusCode, headers: response.headers, text };
    } catch (error) {
      if (signal?.aborted) return { kind: "failure", error: abortedError(call, signal) };
      if (timeout.signal.aborted) {
        return {
          kind: "failure",
          error: new TimeoutError(
            `cannot ${call.description}: timeout: no complete response within ${config.timeoutMs} ms`,
            {
              code: "timeout",
              retryable: true,
              operation: call.operation,
              cause: error,
            },
          ),
        };
      }
      if (error instanceof MdsApiError) return { kind: "failure", error };
      const code = errorCode(error);
      return {
        kind: "failure",
        error: new NetworkError(`cannot ${call.description}: network_error: ${code ?? describe(error)}`, {
          code: "network_error",
          retryable: code !== undefined && retryableNetworkCodes.has(code),
          operation: call.operation,
          cause: error,
        }),
      };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", forward);
    }
  }

  return { send, replaysIdempotencyKeys: () => replayAnnounced };
}

function announcesReplay(headers: Record<string, string | string[] | undefined>): boolean {
  const seconds = Number(header(headers, idempotencyReplayHeader));
  return Number.isInteger(seconds) && seconds > 0;
}

function parseSuccess<T>(
  call: Call<T>,
  result: { status: number; headers: Record<string, string | string[] | undefined>; text: string },
  token: string,
): { ok: true; value: T } | { ok: false; error: ContractViolationError } {
  const requestId = header(result.headers, "x-request-id");
  const violation = (detail: string, cause?: unknown) => ({
    ok: false as const,
    error: new ContractViolationError(`cannot ${call.description}: contract_violation: ${scrub(detail, token)}`, {
      code: "contract_violation",
      status: result.status,
      requestId,
      operation: call.operation,
      cause,
    }),
  });
  if ("ignoreBody" in call.response) return { ok: true, value: call.response.ignoreBody };
  let json: unknown;
  try {
    json = JSON.parse(result.text);
  } catch (error) {
    return violation(`HTTP ${result.status} with a body that is not JSON`, error);
  }
  const parsed = call.response.schema.safeParse(json);
  if (!parsed.success) return violation(summarizeIssues(parsed.error), parsed.error);
  return { ok: true, value: parsed.data };
}

function errorFromResponse(
  call: Call<unknown>,
  result: { status: number; headers: Record<string, string | string[] | undefined>; text: string },
  token: string,
  now: number,
): MdsApiError {
  const status = result.status;
  const requestId = header(result.headers, "x-request-id");
  let json: unknown;
  try {
    json = JSON.parse(result.text);
  } catch {
    json = undefined;
  }
  const parsed = PublicErrorBody.safeParse(json);
  // Without the contract's error body (a proxy's HTML 502, say) the status decides the code.
  // A code we do not know (the public API does not enumerate its codes) is read by its status; the message keeps it.
  const sent = parsed.success ? parsed.data.error.code : undefined;
  const code =
    sent !== undefined && (ServiceErrorCodes as readonly string[]).includes(sent) ? sent : codeForStatus(status);
  const body = parsed.success ? scrub(parsed.data.error.message, token) : `HTTP ${status}`;
  const message = sent === undefined || sent === code ? body : `${body} (${scrub(sent, token)})`;
  const rawHint = parsed.success ? parsed.data.error.hint : undefined;
  const hint = rawHint !== undefined && rawHint !== "" ? scrub(rawHint, token) : undefined;
  const retryAfterMs =
    status === 429 || status === 503 ? parseRetryAfter(result.headers["retry-after"], now) : undefined;
  const existingId =
    call.conflictNamesExisting !== undefined && status === 409
      ? findExistingId(message, hint, call.conflictNamesExisting.logicalId)
      : undefined;
  return createMdsError(`cannot ${call.description}: ${code}: ${message}`, {
    code,
    status,
    hint,
    requestId,
    retryable: retryableStatuses.has(status),
    retryAfterMs,
    operation: call.operation,
    existingId,
  });
}

function normalize(caught: unknown, call: Call<unknown>, signal: AbortSignal | undefined): MdsApiError {
  if (signal?.aborted && !(caught instanceof MdsApiError && caught.code === "aborted"))
    return abortedError(call, signal);
  if (caught instanceof MdsApiError) return caught;
  return new MdsApiError(`cannot ${call.description}: ${describe(caught)}`, {
    code: "internal_error",
    operation: call.operation,
    cause: caught,
  });
}

function throwIfAborted(signal: AbortSignal | undefined, call: Call<unknown>): void {
  if (signal?.aborted) throw abortedError(call, signal);
}

function abortedError(call: Call<unknown>, signal: AbortSignal): AbortedError {
  return new AbortedError(`cannot ${call.description}: aborted`, {
    code: "aborted",
    operation: call.operation,
    cause: signal.reason,
  });
}

function buildUrl(
  baseUrl: string,
  path: string,
  query: Record<string, string | number | undefined> | undefined,
): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) params.set(key, String(value));
  }
  const search = params.toString();
  return `${baseUrl}${path}${search === "" ? "" : `?${search}`}`;
}

async function readBounded(body: AsyncIterable<Buffer | string>, description: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buffer.length;
    if (size > maxResponseBytes) {
      throw new ContractViolationError(
        `cannot ${description}: contract_violation: the response is larger than ${maxResponseBytes} bytes`,
        {
          code: "contract_violation",
        },
      );
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function errorCode(error: unknown): string | undefined {
  for (
    let current: unknown = error, depth = 0;
    current instanceof Error && depth < 4;
    current = current.cause, depth++
  ) {
    if ("code" in current && typeof current.code === "string") return current.code;
  }
  return undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Paths and reasons only: zod's messages do not quote values, and values may be secrets. */
function summarizeIssues(error: z.ZodError): string {
  const shown = error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length === 0 ? "(body)" : issue.path.join(".")}: ${issue.message}`);
  const more = error.issues.length > 3 ? ` (and ${error.issues.length - 3} more)` : "";
  return `the response does not match the contract: ${shown.join("; ")}${more}`;
}

const connectionStringPattern = /\bpostgres(?:ql)?:\/\/\S+/gi;

/** Whatever a server echoes, our messages never carry the token or a connection string. */
function scrub(text: string, token: string): string {
  let out = text.replace(connectionStringPattern, "[redacted connection string]");
  if (token.length >= 4) out = out.split(token).join("[redacted]");
  return out;
}

const resourceIdPattern = /\b(?:proj|db|con|bkp)_[A-Za-z0-9]+/g;

/** The hint names only the holder (`existing project id: proj_…`); the message's last id is the holder. */
function findExistingId(message: string, hint: string | undefined, logicalId: string | undefined): string | undefined {
  const ids = (text: string): string[] => {
    const cleaned = logicalId === undefined || logicalId === "" ? text : text.split(logicalId).join(" ");
    return [...cleaned.matchAll(resourceIdPattern)].map((m) => m[0]);
  };
  return ids(hint ?? "").at(-1) ?? ids(message).at(-1);
}
