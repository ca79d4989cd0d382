import { KubeConflictError } from "../kube/errors.ts";

/** An error that carries the condition reason it should be reported under (a loop reason or one of the kind's). */
export class ReconcileError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ReconcileError";
    this.reason = reason;
  }
}

/**
 * What retrying cannot fix: reported (Stalled), then left alone until the spec (generation) changes, or, with
 * `recheckMs`, looked at again that much later (the fix may be outside the spec: a credentials Secret, a remote object).
 */
export class TerminalError extends ReconcileError {
  readonly recheckMs: number | undefined;
  constructor(reason: string, message: string, options?: { cause?: unknown; recheckMs?: number }) {
    super(reason, message, options);
    this.name = "TerminalError";
    this.recheckMs = options?.recheckMs;
  }
}

/**
 * Waiting on something the user creates (a credentials Secret, a referenced object that is missing or not ready):
 * retried at least every 30 s, since no watched event may announce it.
 */
export class WaitingError extends ReconcileError {
  /**
   * A wait this process expects to end by itself in moments, with an event that wakes the resource (a referenced
   * resource its loop has not looked at yet since the operator started): no condition, no Event, so an operator
   * restart writes nothing and warns of nothing.
   */
  readonly quiet: boolean;
  constructor(reason: string, message: string, options?: { cause?: unknown; quiet?: boolean }) {
    super(reason, message, options);
    this.name = "WaitingError";
    this.quiet = options?.quiet === true;
  }
}

/** How an error is reported and retried; decided here and nowhere else. */
interface ErrorClass {
  reason: string;
  terminal: boolean;
  /** Kubernetes 409: requeue at once, silently (no condition, no event). */
  conflict: boolean;
  /** A quiet wait (WaitingError's `quiet`): retried like a wait, reported nowhere but the debug log. */
  quiet?: boolean;
  /** A wait the service asked for (Retry-After), if any; for a terminal error, when to look again (if ever). */
  retryAfterMs?: number;
  /**
   * Waiting on something the user creates (a credentials Secret, a project or database that is not ready):
   * retried at least this often, since no watched event announces it.
   */
  maxDelayMs?: number;
}

function apiCodeOf(err: unknown): { code: string; status?: number; retryAfterMs?: number } | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; status?: unknown; retryAfterMs?: unknown };
  if (typeof e.code !== "string") return undefined;
  return {
    code: e.code,
    ...(typeof e.status === "number" ? { status: e.status } : {}),
    ...(typeof e.retryAfterMs === "number" ? { retryAfterMs: e.retryAfterMs } : {}),
  };
}

export function classifyError(err: unknown): ErrorClass {
  if (err instanceof KubeConflictError) return { reason: "ReconcileError", terminal: false, conflict: true };
  if (err instanceof TerminalError)
    return {
      reason: err.reason,
      terminal: true,
      conflict: false,
      ...(err.recheckMs === undefined ? {} : { retryAfterMs: err.recheckMs }),
    };
  if (err instanceof WaitingError)
    return { reason: err.reason, terminal: false, conflict: false, maxDelayMs: 30_000, quiet: err.quiet };
  if (err instanceof ReconcileError) return { reason: err.reason, terminal: false, conflict: false };
  const api = apiCodeOf(err);
  if (api !== undefined && !(err instanceof Error && err.name.startsWith("Kube"))) {
    switch (api.code) {
      case "unauthorized":
      case "forbidden":
        return { reason: "CredentialsInvalid", terminal: false, conflict: false };
      case "rate_limited":
        return {
          reason: "RateLimited",
          terminal: false,
          conflict: false,
          ...(api.retryAfterMs === undefined ? {} : { retryAfterMs: api.retryAfterMs }),
        };
      case "invalid_request":
      case "unprocessable":
      case "region_unavailable":
        return { reason: "InvalidSpec", terminal: true, conflict: false };
      case "conflict":
        return { reason: "Conflict", terminal: false, conflict: false };
      case "contract_violation":
        return { reason: "RemoteUnreadable", terminal: false, conflict: false };
      case "unavailable":
      case "internal_error":
      case "timeout":
      case "network_error":
        return { reason: "ApiUnavailable", terminal: false, conflict: false };
    }
  }
  return { reason: "ReconcileError", terminal: false, conflict: false };
}

/** A message fit for a condition or an Event: one line, bounded, no stack. */
export function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 1000 ? `${line.slice(0, 997)}...` : line;
}
