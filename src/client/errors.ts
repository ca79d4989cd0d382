// One small hierarchy for everything the client can throw. Callers branch on the class
// (`instanceof NotFoundError`) or on the stable `code`; `retryable` says whether the same
// call may succeed later without a change (the client has already retried what it may).

/** Codes the service sends (docs/decisions.md#errors) plus the client's own. */
export const ServiceErrorCodes = [
  "invalid_request",
  "unauthorized",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "conflict",
  "payload_too_large",
  "unprocessable",
  "region_unavailable",
  "rate_limited",
  "internal_error",
  "unavailable",
] as const;
type ServiceErrorCode = (typeof ServiceErrorCodes)[number];

type ClientErrorCode = "contract_violation" | "timeout" | "network_error" | "aborted";

/** A known code, or whatever code a compatible service sent that we do not know. */
type MdsErrorCode = ServiceErrorCode | ClientErrorCode | (string & {});

interface MdsApiErrorDetails {
  code: MdsErrorCode;
  status?: number | undefined;
  hint?: string | undefined;
  requestId?: string | undefined;
  retryable?: boolean | undefined;
  /** Milliseconds the service asked us to wait (`Retry-After`), when it said. */
  retryAfterMs?: number | undefined;
  /** The client operation that failed, e.g. `getDatabase`. */
  operation?: string | undefined;
  cause?: unknown;
}

export class MdsApiError extends Error {
  override name = "MdsApiError";
  readonly code: MdsErrorCode;
  readonly status: number | undefined;
  readonly hint: string | undefined;
  readonly requestId: string | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly operation: string | undefined;

  constructor(message: string, details: MdsApiErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = details.code;
    this.status = details.status;
    this.hint = details.hint;
    this.requestId = details.requestId;
    this.retryable = details.retryable ?? false;
    this.retryAfterMs = details.retryAfterMs;
    this.operation = details.operation;
  }
}

export class InvalidRequestError extends MdsApiError {
  override name = "InvalidRequestError";
}
export class UnauthorizedError extends MdsApiError {
  override name = "UnauthorizedError";
}
export class ForbiddenError extends MdsApiError {
  override name = "ForbiddenError";
}
export class NotFoundError extends MdsApiError {
  override name = "NotFoundError";
}
export class MethodNotAllowedError extends MdsApiError {
  override name = "MethodNotAllowedError";
}

export class ConflictError extends MdsApiError {
  override name = "ConflictError";
  /**
   * The id of the resource that already holds the key (for a duplicate `logicalId` the
   * service names it in the message or hint), so a caller can adopt it instead of creating.
   */
  readonly existingId: string | undefined;
  constructor(message: string, details: MdsApiErrorDetails & { existingId?: string | undefined }) {
    super(message, details);
    this.existingId = details.existingId;
  }
}

export class PayloadTooLargeError extends MdsApiError {
  override name = "PayloadTooLargeError";
}
export class UnprocessableError extends MdsApiError {
  override name = "UnprocessableError";
}
/** 422 `region_unavailable`: a kind of unprocessable request. */
export class RegionUnavailableError extends UnprocessableError {
  override name = "RegionUnavailableError";
}
export class RateLimitedError extends MdsApiError {
  override name = "RateLimitedError";
}
export class InternalServerError extends MdsApiError {
  override name = "InternalServerError";
}
export class UnavailableError extends MdsApiError {
  override name = "UnavailableError";
}

/** A response that does not match the contract: malformed JSON, a missing or mistyped field. */
export class ContractViolationError extends MdsApiError {
  override name = "ContractViolationError";
}
/** An attempt got no complete response within `timeoutMs`. */
export class TimeoutError extends MdsApiError {
  override name = "TimeoutError";
}
/** The connection failed: refused, reset, DNS, TLS. */
export class NetworkError extends MdsApiError {
  override name = "NetworkError";
}
/** The caller's signal aborted the call. */
export class AbortedError extends MdsApiError {
  override name = "AbortedError";
}

type ErrorClass = new (message: string, details: MdsApiErrorDetails) => MdsApiError;

const classByCode: Record<string, ErrorClass> = {
  invalid_request: InvalidRequestError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  unprocessable: UnprocessableError,
  region_unavailable: RegionUnavailableError,
  rate_limited: RateLimitedError,
  internal_error: InternalServerError,
  unavailable: UnavailableError,
  contract_violation: ContractViolationError,
  timeout: TimeoutError,
  network_error: NetworkError,
  aborted: AbortedError,
};

/** The code a status implies when the body does not say (a proxy's HTML 502, an unknown code). */
export function codeForStatus(status: number): ServiceErrorCode {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 409:
      return "conflict";
    case 413:
      return "payload_too_large";
    case 422:
      return "unprocessable";
    case 429:
      return "rate_limited";
    case 503:
      return "unavailable";
    default:
      return status >= 500 ? "internal_error" : "invalid_request";
  }
}

/**
 * Builds the error for a code. An unknown code from a compatible service keeps its code but
 * gets the class its HTTP status implies, so `instanceof` still works.
 */
export function createMdsError(
  message: string,
  details: MdsApiErrorDetails & { existingId?: string | undefined },
): MdsApiError {
  const known = classByCode[details.code];
  const cls =
    known ?? (details.status === undefined ? MdsApiError : (classByCode[codeForStatus(details.status)] ?? MdsApiError));
  if (cls === ConflictError) return new ConflictError(message, details);
  return new cls(message, details);
}
