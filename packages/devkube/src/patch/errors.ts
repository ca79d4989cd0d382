// Errors of patch application, carrying the HTTP status and Status reason kube-apiserver answers with.

interface PatchCause {
  type: string;
  field: string;
  message: string;
}

export class PatchError extends Error {
  readonly status: 400 | 409 | 422;
  readonly reason: string;
  readonly causes?: PatchCause[];
  constructor(
    status: 400 | 409 | 422,
    reason: string,
    message: string,
    options?: { causes?: PatchCause[]; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "PatchError";
    this.status = status;
    this.reason = reason;
    if (options?.causes !== undefined) this.causes = options.causes;
  }
}

export const badRequest = (message: string): PatchError => new PatchError(400, "BadRequest", message);
