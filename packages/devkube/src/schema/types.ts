// The parsed form of a structural schema node (a CRD openAPIV3Schema after structural checks).

export type SchemaType = "object" | "array" | "string" | "integer" | "number" | "boolean";

export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  fieldPath?: string;
  optionalOldSelf?: boolean;
}

export interface Node {
  type?: SchemaType;
  properties?: Record<string, Node>;
  /** schema for map values; `true` means "any value is kept" */
  additionalProperties?: Node | true;
  items?: Node;
  required?: string[];
  nullable: boolean;
  hasDefault: boolean;
  default?: unknown;
  enum?: unknown[];
  format?: string;
  maximum?: number;
  minimum?: number;
  exclusiveMaximum: boolean;
  exclusiveMinimum: boolean;
  multipleOf?: number;
  maxLength?: number;
  minLength?: number;
  pattern?: RegExp;
  patternSource?: string;
  maxItems?: number;
  minItems?: number;
  uniqueItems: boolean;
  maxProperties?: number;
  minProperties?: number;
  preserveUnknownFields: boolean;
  embeddedResource: boolean;
  intOrString: boolean;
  listType?: "atomic" | "set" | "map";
  listMapKeys?: string[];
  mapType?: "atomic" | "granular";
  /** value-validation-only junctors (allOf/anyOf/oneOf/not) */
  allOf: Node[];
  anyOf: Node[];
  oneOf: Node[];
  not?: Node;
  rules: CelRule[];
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Deep equality of decoded JSON values. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}
