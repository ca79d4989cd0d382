// Field errors worded exactly like k8s.io/apimachinery/pkg/util/validation/field, and the 422 Status
// kube-apiserver builds from them (apimachinery errors.NewInvalid).

type FieldErrorType =
  | "FieldValueRequired"
  | "FieldValueInvalid"
  | "FieldValueNotSupported"
  | "FieldValueTypeInvalid"
  | "FieldValueForbidden"
  | "FieldValueDuplicate"
  | "FieldValueTooLong"
  | "FieldValueTooMany";

export interface FieldError {
  type: FieldErrorType;
  /** "spec.replicas", "spec.items[2].name" */
  field: string;
  /**
   * What Kubernetes prints for this error after the field, and puts in the Status cause's message
   * (field.Error.ErrorBody): 'Invalid value: "bad": must be ...', "Required value".
   */
  message: string;
  /** the bare detail after the type and value ("must be ..."), "" when none */
  detail: string;
  badValue?: unknown;
}

/** Thrown by compileSchema when the schema itself is invalid, non-structural or has a CEL rule that does not compile. */
export class SchemaError extends Error {
  readonly errors: FieldError[];
  constructor(message: string, errors: FieldError[]) {
    super(message);
    this.name = "SchemaError";
    this.errors = errors;
  }
}

const typeTitles: Record<FieldErrorType, string> = {
  FieldValueRequired: "Required value",
  FieldValueInvalid: "Invalid value",
  FieldValueNotSupported: "Unsupported value",
  FieldValueTypeInvalid: "Invalid value",
  FieldValueForbidden: "Forbidden",
  FieldValueDuplicate: "Duplicate value",
  FieldValueTooLong: "Too long",
  FieldValueTooMany: "Too many",
};

function make(type: FieldErrorType, field: string, detail: string, ...value: [] | [unknown]): FieldError {
  const err: FieldError =
    value.length === 0
      ? { type, field, message: "", detail }
      : { type, field, message: "", detail, badValue: value[0] };
  err.message = errorBody(err);
  return err;
}

export const required = (field: string, detail = ""): FieldError => make("FieldValueRequired", field, detail);
export const forbidden = (field: string, detail: string): FieldError => make("FieldValueForbidden", field, detail);
export const invalid = (field: string, value: unknown, detail: string): FieldError =>
  make("FieldValueInvalid", field, detail, value);
export const typeInvalid = (field: string, value: unknown, detail: string): FieldError =>
  make("FieldValueTypeInvalid", field, detail, value);
export const duplicate = (field: string, value: unknown): FieldError => make("FieldValueDuplicate", field, "", value);

export function notSupported(field: string, value: unknown, supported: string[]): FieldError {
  const detail = supported.length > 0 ? `supported values: ${supported.map((s) => JSON.stringify(s)).join(", ")}` : "";
  return make("FieldValueNotSupported", field, detail, value);
}

export function tooLong(field: string, value: unknown, max: number): FieldError {
  const detail = max >= 0 ? `may not be more than ${max} ${max === 1 ? "byte" : "bytes"}` : "value is too long";
  return make("FieldValueTooLong", field, detail, value);
}

export function tooMany(field: string, actual: number, max: number): FieldError {
  const detail = max >= 0 ? `must have at most ${max} ${max === 1 ? "item" : "items"}` : "has too many items";
  // An unknown count is printed without a value (field.omitValue); we model that as no badValue.
  return actual >= 0 ? make("FieldValueTooMany", field, detail, actual) : make("FieldValueTooMany", field, detail);
}

/** A bad value Kubernetes prints as a Go literal (e.g. a CRD's ValidationRule struct). */
export class GoLiteral {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toJSON(): string {
    return this.text;
  }
}

/** Go's fmt %#v / %v / %q rendering of a decoded JSON value, as field.Error prints bad values. */
function formatGoValue(value: unknown, nested = false): string {
  if (value instanceof GoLiteral) return value.text;
  if (value === null || value === undefined) return nested ? "interface {}(nil)" : "null";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") return formatGoNumber(value);
  if (typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `[]interface {}{${value.map((v) => formatGoValue(v, true)).join(", ")}}`;
  if (typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${formatGoValue((value as Record<string, unknown>)[k], true)}`);
    return `map[string]interface {}{${entries.join(", ")}}`;
  }
  return String(value);
}

function formatGoNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n);
  // Go %v on float64 uses the shortest representation with exponent for large/small magnitudes.
  const exp = Math.floor(Math.log10(Math.abs(n)));
  if (exp < -4 || exp >= 21) {
    const [mant, e] = n.toExponential().split("e");
    const ev = Number(e);
    return `${mant}e${ev < 0 ? "-" : "+"}${String(Math.abs(ev)).padStart(2, "0")}`;
  }
  return String(n);
}

/**
 * field.Error.ErrorBody(): "Invalid value: \"x\": detail", computed from type, badValue and detail
 * (for a FieldError this equals its message). An object without `detail` has its `message` taken
 * as the detail.
 */
export function errorBody(err: {
  type: FieldErrorType;
  detail?: string | undefined;
  message?: string | undefined;
  badValue?: unknown;
}): string {
  const title = typeTitles[err.type];
  let s: string;
  if (
    err.type === "FieldValueRequired" ||
    err.type === "FieldValueForbidden" ||
    err.type === "FieldValueTooLong" ||
    !("badValue" in err)
  ) {
    s = title;
  } else {
    s = `${title}: ${formatGoValue(err.badValue)}`;
  }
  const detail = "detail" in err ? (err.detail ?? "") : (err.message ?? "");
  if (detail.length > 0) s += `: ${detail}`;
  return s;
}

/** field.Error.Error(): "spec.x: Invalid value: ...". */
export function formatFieldError(err: FieldError): string {
  return `${err.field}: ${err.message}`;
}

/** utilerrors aggregate wording: one error alone, several as "[a, b]", duplicates dropped. */
export function aggregateMessage(errors: FieldError[]): string {
  const msgs = [...new Set(errors.map(formatFieldError))];
  if (msgs.length === 1) return msgs[0] ?? "";
  return `[${msgs.join(", ")}]`;
}

/** The 422 Status kube-apiserver answers for invalid objects (apimachinery errors.NewInvalid). */
export function invalidStatus(
  kind: string,
  group: string,
  name: string,
  errors: FieldError[],
): Record<string, unknown> {
  const qualified = group === "" ? kind : `${kind}.${group}`;
  const message =
    errors.length === 0
      ? `${qualified} ${JSON.stringify(name)} is invalid`
      : `${qualified} ${JSON.stringify(name)} is invalid: ${aggregateMessage(errors)}`;
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason: "Invalid",
    details: {
      name,
      group,
      kind,
      causes: errors.map((e) => ({ reason: e.type, message: e.message, field: e.field })),
    },
    code: 422,
  };
}
