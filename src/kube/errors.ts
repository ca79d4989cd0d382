// Typed errors of the Kubernetes boundary. Messages never carry request headers (a bearer token once
// leaked into logs through client-node's ApiException, snyk/kubernetes-monitor#1284).

export class KubeError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly reason: string | undefined;
  constructor(message: string, options: { code?: string; status?: number; reason?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? "kube_error";
    this.status = options.status;
    this.reason = options.reason;
  }
}

export class KubeNotFoundError extends KubeError {}
/** 409: a stale resourceVersion (reason Conflict) or a name already taken (reason AlreadyExists). */
export class KubeConflictError extends KubeError {}
export class KubeAlreadyExistsError extends KubeConflictError {}
class KubeInvalidError extends KubeError {}
class KubeForbiddenError extends KubeError {}
/** 410: a watch or list continue token too old; the caller relists. */
export class KubeGoneError extends KubeError {}
class KubeUnavailableError extends KubeError {}

export function isKubeConflict(err: unknown): err is KubeConflictError {
  return err instanceof KubeConflictError;
}
export function isKubeNotFound(err: unknown): err is KubeNotFoundError {
  return err instanceof KubeNotFoundError;
}

/** Builds the typed error for an HTTP status and a Kubernetes `Status` body (if any). */
export function kubeErrorFor(what: string, status: number, body: unknown): KubeError {
  const s = typeof body === "object" && body !== null ? (body as { reason?: unknown; message?: unknown }) : {};
  const reason = typeof s.reason === "string" ? s.reason : undefined;
  const detail = typeof s.message === "string" ? s.message : `HTTP ${status}`;
  const message = `${what}: ${detail}`;
  const opts = { status, ...(reason === undefined ? {} : { reason }) };
  switch (status) {
    case 404:
      return new KubeNotFoundError(message, { ...opts, code: "not_found" });
    case 409:
      return reason === "AlreadyExists"
        ? new KubeAlreadyExistsError(message, { ...opts, code: "already_exists" })
        : new KubeConflictError(message, { ...opts, code: "conflict" });
    case 410:
      return new KubeGoneError(message, { ...opts, code: "gone" });
    case 400:
    case 422:
      return new KubeInvalidError(message, { ...opts, code: "invalid" });
    case 401:
    case 403:
      return new KubeForbiddenError(message, { ...opts, code: "forbidden" });
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return new KubeUnavailableError(message, { ...opts, code: "unavailable" });
    default:
      return new KubeError(message, { ...opts, code: "kube_error" });
  }
}
