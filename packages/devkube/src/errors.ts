import type { Obj } from "./types.ts";

// Every non-2xx answer is a Kubernetes Status object; ApiError carries one through the code.
interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}
interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  constructor(code: number, reason: string, message: string, details?: StatusDetails, options?: ErrorOptions) {
    super(message, options);
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
  toStatus(): Obj {
    return failureStatus(this.code, this.reason, this.message, this.details);
  }
}

export function failureStatus(code: number, reason: string, message: string, details?: StatusDetails): Obj {
  const status: Obj = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason };
  if (details && Object.keys(details).length > 0) status["details"] = details;
  status["code"] = code;
  return status;
}

/** What kube calls a resource in messages: "configmaps" or "widgets.example.com". */
interface ResourceName {
  group: string;
  plural: string;
}
export function qualified(r: ResourceName): string {
  return r.group ? `${r.plural}.${r.group}` : r.plural;
}

function details(r: ResourceName, name: string): StatusDetails {
  const d: StatusDetails = { name };
  if (r.group) d.group = r.group;
  d.kind = r.plural;
  return d;
}

export function notFound(r: ResourceName, name: string): ApiError {
  return new ApiError(404, "NotFound", `${qualified(r)} "${name}" not found`, details(r, name));
}
export function conflict(
  r: ResourceName,
  name: string,
  why = "the object has been modified; please apply your changes to the latest version and try again",
): ApiError {
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(r)} "${name}": ${why}`,
    details(r, name),
  );
}
export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}
export function forbidden(r: ResourceName, name: string, why: string): ApiError {
  return new ApiError(403, "Forbidden", `${qualified(r)} "${name}" is forbidden: ${why}`, details(r, name));
}
export function methodNotAllowed(): ApiError {
  return new ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
}
export function pathNotFound(): ApiError {
  return new ApiError(404, "NotFound", "the server could not find the requested resource");
}
export function unsupportedMediaType(contentType: string, accepted: string[]): ApiError {
  return new ApiError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`,
    contentType ? {} : undefined,
  );
}
export function internal(message: string): ApiError {
  return new ApiError(500, "InternalError", `Internal error occurred: ${message}`, { causes: [{ message }] });
}

export interface FieldCause {
  type: string;
  field: string;
  message: string;
}

/** 422 Invalid, worded like kube: `Widget.example.com "w1" is invalid: spec.size: Invalid value: ...`. */
export function invalid(kind: string, group: string, name: string, causes: FieldCause[]): ApiError {
  const qualifiedKind = group ? `${kind}.${group}` : kind;
  const texts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const joined = texts.length === 1 ? texts[0] : `[${texts.join(", ")}]`;
  const d: StatusDetails = { name };
  if (group) d.group = group;
  d.kind = kind;
  d.causes = causes.map((c) => ({ reason: c.type, message: c.message, field: c.field }));
  return new ApiError(422, "Invalid", `${qualifiedKind} "${name}" is invalid: ${joined}`, d);
}
