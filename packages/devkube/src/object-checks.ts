import { badRequest, invalid, type FieldCause } from "./errors.ts";
import { apiVersionOf, type ResourceType } from "./resource-type.ts";
import { objectMetaFields } from "./schema/index.ts";
import { clone, isObj, metaOf, type Obj } from "./types.ts";

// Checks every write passes before kind rules: body shape, metadata validity, unknown fields.

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function validateMeta(rt: ResourceType, obj: Obj, old: Obj | undefined): void {
  const meta = metaOf(obj);
  const name = String(meta["name"] ?? "");
  const causes: FieldCause[] = [];
  if (!old) {
    const isLabel = rt.storageKey === "/namespaces";
    const re = isLabel ? DNS_LABEL : DNS_SUBDOMAIN;
    const maxLen = isLabel ? 63 : 253;
    if (!re.test(name) || name.length > maxLen) {
      causes.push({
        type: "FieldValueInvalid",
        field: "metadata.name",
        message: isLabel
          ? `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
          : `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
      });
    }
  }
  for (const field of ["labels", "annotations"]) {
    const v = meta[field];
    if (v === undefined || v === null) continue;
    if (!isObj(v))
      throw badRequest(
        `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: json: cannot unmarshal ${typeof v} into Go struct field ObjectMeta.metadata.${field} of type map[string]string`,
      );
    for (const [k, val] of Object.entries(v)) {
      if (typeof val !== "string")
        throw badRequest(
          `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: json: cannot unmarshal ${typeof val} into Go struct field ObjectMeta.metadata.${field} of type string`,
        );
      if (field === "labels" && (!/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(val) || val.length > 63)) {
        causes.push({
          type: "FieldValueInvalid",
          field: `metadata.labels`,
          message: `Invalid value: "${val}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
        });
      }
      if (
        !/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(
          k,
        )
      ) {
        causes.push({
          type: "FieldValueInvalid",
          field: `metadata.${field}`,
          message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
        });
      }
    }
  }
  const annotations = meta["annotations"];
  if (isObj(annotations)) {
    const size = Object.entries(annotations).reduce((n, [k, v]) => n + k.length + String(v).length, 0);
    if (size > 256 * 1024)
      causes.push({
        type: "FieldValueTooLong",
        field: "metadata.annotations",
        message: `Too long: must have at most ${256 * 1024} bytes`,
      });
  }
  const fins = meta["finalizers"];
  if (fins !== undefined && fins !== null && (!Array.isArray(fins) || fins.some((f) => typeof f !== "string"))) {
    throw badRequest(
      `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type []string`,
    );
  }
  const refs = meta["ownerReferences"];
  if (Array.isArray(refs)) {
    refs.forEach((r, i) => {
      if (!isObj(r)) return;
      for (const f of ["apiVersion", "kind", "name", "uid"]) {
        if (!r[f])
          causes.push({
            type: "FieldValueRequired",
            field: `metadata.ownerReferences[${i}].${f}`,
            message:
              f === "uid" ? `Invalid value: "": uid must not be empty` : `Invalid value: "": ${f} must not be empty`,
          });
      }
    });
  }
  if (causes.length > 0) throw invalid(rt.kind, rt.group, name, causes);
}

/** The `fieldValidation` query parameter of a write: what to do with unknown fields. */
export type FieldValidation = "Strict" | "Warn" | "Ignore";

/** Drops unknown fields (typed decoding or structural pruning); Strict rejects, Warn warns. */
export function pruneUnknown(rt: ResourceType, obj: Obj, fieldValidation: FieldValidation, warnings: string[]): void {
  const unknown: string[] = [];
  const meta = metaOf(obj);
  for (const k of Object.keys(meta)) {
    if (!objectMetaFields.has(k)) {
      unknown.push(`metadata.${k}`);
      delete meta[k];
    }
  }
  pruneNested(obj, META_NESTED, unknown);
  if (rt.knownFields) {
    for (const k of Object.keys(obj)) {
      if (!rt.knownFields.has(k)) {
        unknown.push(k);
        delete obj[k];
      }
    }
    pruneNested(obj, rt.nestedKnownFields ?? {}, unknown);
  } else if (rt.schema) {
    const pruned = rt.schema.prune(obj);
    unknown.push(...pruned.unknownFields);
    for (const k of Object.keys(obj)) delete obj[k];
    Object.assign(obj, pruned.object);
  }
  if (unknown.length === 0) return;
  if (fieldValidation === "Strict") {
    throw badRequest(
      `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(", ")}`,
    );
  }
  if (fieldValidation === "Warn") for (const f of unknown) warnings.push(`unknown field "${f}"`);
}

const META_NESTED: Record<string, string[]> = {
  "metadata.ownerReferences[]": ["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"],
  "metadata.managedFields[]": ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"],
};

/** Typed decoding of nested structs: unknown keys are dropped and reported as "rules[0].foo". */
function pruneNested(obj: Obj, spec: Record<string, string[]>, unknown: string[]): void {
  for (const [path, fields] of Object.entries(spec)) {
    const allowed = new Set(fields);
    const visit = (node: unknown, segments: string[], shown: string): void => {
      if (segments.length === 0) {
        if (!isObj(node)) return;
        for (const k of Object.keys(node))
          if (!allowed.has(k)) {
            unknown.push(`${shown}.${k}`);
            delete node[k];
          }
        return;
      }
      const [head, ...rest] = segments as [string, ...string[]];
      const list = head.endsWith("[]");
      const key = list ? head.slice(0, -2) : head;
      if (!isObj(node)) return;
      const child = node[key];
      const at = shown ? `${shown}.${key}` : key;
      if (list) {
        if (Array.isArray(child)) child.forEach((item, i) => visit(item, rest, `${at}[${i}]`));
      } else {
        visit(child, rest, at);
      }
    };
    visit(obj, path.split("."), "");
  }
}

/** Body checks every write makes: an object, of this kind, for this namespace. */
export function decodeObject(rt: ResourceType, body: unknown, ns: string | undefined): Obj {
  if (!isObj(body))
    throw badRequest(
      `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: the body is not an object`,
    );
  const obj = clone(body);
  const av = obj["apiVersion"];
  const kind = obj["kind"];
  if (av !== undefined && av !== "" && av !== apiVersionOf(rt)) {
    throw badRequest(
      `the API version in the data (${String(av)}) does not match the expected API version (${apiVersionOf(rt)})`,
    );
  }
  if (kind !== undefined && kind !== "" && kind !== rt.kind) {
    throw badRequest(`the kind in the data (${String(kind)}) does not match the expected kind (${rt.kind})`);
  }
  obj["apiVersion"] = apiVersionOf(rt);
  obj["kind"] = rt.kind;
  const meta = obj["metadata"];
  if (meta !== undefined && !isObj(meta))
    throw badRequest(
      `${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: json: cannot unmarshal into Go struct field ${rt.kind}.metadata of type v1.ObjectMeta`,
    );
  const m = metaOf(obj);
  if (rt.namespaced) {
    if (m["namespace"] !== undefined && m["namespace"] !== "" && m["namespace"] !== ns) {
      throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
    }
    m["namespace"] = ns ?? "";
  } else {
    delete m["namespace"];
  }
  return obj;
}
