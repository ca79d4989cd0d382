import { errorStatus, type ErrorCode } from "../../contract/index.ts";

/** An error that becomes an error response (docs/decisions.md#errors). `message` and `hint` are shown to callers: never put secrets in them. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly hint: string;
  readonly headers: Record<string, string>;
  constructor(
    code: ErrorCode,
    message: string,
    hint = "",
    options?: ErrorOptions & { headers?: Record<string, string> },
  ) {
    super(message, options);
    this.name = "ServiceError";
    this.code = code;
    this.status = errorStatus[code];
    this.hint = hint;
    this.headers = options?.headers ?? {};
  }
}

/**
 * What a client sent, as an error message may quote it: at most a short prefix (a 60 KB path id was echoed whole),
 * JSON-quoted so control characters cannot forge lines in a client's log.
 */
export const echo = (sent: unknown, max = 64): string => {
  const text = String(sent);
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text);
};

export const invalidRequest = (message: string, hint = "") => new ServiceError("invalid_request", message, hint);
/** "branch" → "branches", "database" → "databases": the hint speaks of the kind in the plural. */
const pluralOf = (what: string) => (/(s|x|sh|ch)$/.test(what) ? `${what}es` : `${what}s`);
export const notFound = (what: string, id: string) =>
  new ServiceError(
    "not_found",
    `${what} ${echo(id)} not found`,
    `check the id; ${pluralOf(what)} of other workspaces are not visible to this token`,
  );
export const conflict = (message: string, hint = "") => new ServiceError("conflict", message, hint);
export const unprocessable = (message: string, hint = "") => new ServiceError("unprocessable", message, hint);

/**
 * A PostgreSQL server that answers but refuses writes: a read-only transaction (a standby not yet promoted, or a
 * managed server that turned itself read-only as its storage filled up) or a full disk. The platform's fault, for now.
 */
export function refusesWrites(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "25006" || code === "53100";
}

/** Errors that mean "PostgreSQL is not reachable" or refuses writes for now: 503 with Retry-After rather than 500. */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (refusesWrites(err)) return true;
  if (
    typeof e.code === "string" &&
    (/^(08|57P0[1-3]|53300)/.test(e.code) ||
      ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND"].includes(e.code))
  )
    return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
    e.message ?? "",
  );
}

/** A write that found its filesystem full (or over a quota), anywhere in the error's cause chain. */
export function isNoSpace(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "ENOSPC" || code === "EDQUOT") return true;
  }
  return false;
}
