import { createHash } from "node:crypto";
import type { Registry } from "./registry.ts";
import type { ResourceType } from "./resource-type.ts";
import { isObj, type Obj } from "./types.ts";

// A minimal OpenAPI v3: enough for kubectl's field-validation probe (PATCH operations with
// x-kubernetes-group-version-kind and a fieldValidation parameter), and CRD schemas so that
// `kubectl explain` shows CR field descriptions.

const OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const OBJECT_META_SCHEMA: Obj = {
  description:
    "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
  type: "object",
  properties: {
    name: { description: "Name must be unique within a namespace.", type: "string" },
    namespace: { description: "Namespace defines the space within which each name must be unique.", type: "string" },
    generateName: {
      description:
        "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided.",
      type: "string",
    },
    labels: {
      description:
        "Map of string keys and values that can be used to organize and categorize (scope and select) objects.",
      type: "object",
      additionalProperties: { type: "string", default: "" },
    },
    annotations: {
      description:
        "Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata.",
      type: "object",
      additionalProperties: { type: "string", default: "" },
    },
    finalizers: {
      description: "Must be empty before the object is deleted from the registry.",
      type: "array",
      items: { type: "string", default: "" },
    },
    ownerReferences: {
      description: "List of objects depended by this object.",
      type: "array",
      items: { type: "object" },
    },
    uid: { description: "UID is the unique in time and space value for this object.", type: "string" },
    resourceVersion: {
      description: "An opaque value that represents the internal version of this object.",
      type: "string",
    },
    generation: {
      description: "A sequence number representing a specific generation of the desired state.",
      type: "integer",
      format: "int64",
    },
    creationTimestamp: {
      description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
      type: "string",
      format: "date-time",
    },
    deletionTimestamp: {
      description: "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted.",
      type: "string",
      format: "date-time",
    },
  },
};

const PATCH_TYPES_CR = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
const PATCH_TYPES_BUILTIN = [...PATCH_TYPES_CR, "application/strategic-merge-patch+json"];

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

function schemaName(rt: ResourceType): string {
  const g = rt.group ? rt.group.split(".").reverse().join(".") : "io.k8s.api.core";
  return `${g}.${rt.version}.${rt.kind}`;
}

function param(name: string, type = "string"): Obj {
  return { name, in: "query", description: name, schema: { type, uniqueItems: true } };
}

function operations(rt: ResourceType): Obj {
  const gvk = { group: rt.group, version: rt.version, kind: rt.kind };
  // Built-ins carry no component schema on purpose: kubectl then builds strategic merge patches
  // from its compiled-in types (with the right list strategies) instead of from a thin schema.
  const ref = rt.custom ? { $ref: `#/components/schemas/${schemaName(rt)}` } : { type: "object" };
  const json = { "application/json": { schema: ref } };
  const writeParams = [param("dryRun"), param("fieldManager"), param("fieldValidation")];
  const op = (action: string, extra: Obj = {}): Obj => ({
    description: `${action} the specified ${rt.kind}`,
    operationId: `${action}${rt.kind}`,
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": gvk,
    responses: { "200": { description: "OK", content: json } },
    ...extra,
  });
  const base = `/${gvPath(rt.group, rt.version)}${rt.namespaced ? "/namespaces/{namespace}" : ""}/${rt.plural}`;
  const patchTypes = rt.custom ? PATCH_TYPES_CR : PATCH_TYPES_BUILTIN;
  // An object and each of its subresources: read, replace, patch.
  const objectOps = (): Obj => ({
    get: op("get"),
    put: op("put", { parameters: writeParams, requestBody: { content: { "*/*": { schema: ref } }, required: true } }),
    patch: op("patch", {
      parameters: [...writeParams, param("force", "boolean")],
      requestBody: {
        content: Object.fromEntries(patchTypes.map((t) => [t, { schema: { type: "object" } }])),
        required: true,
      },
    }),
  });
  const paths: Obj = {
    [base]: {
      get: op("list"),
      post: op("post", {
        parameters: writeParams,
        requestBody: { content: { "*/*": { schema: ref } }, required: true },
      }),
      parameters: rt.namespaced ? [{ name: "namespace", in: "path", required: true, schema: { type: "string" } }] : [],
    },
    [`${base}/{name}`]: {
      ...objectOps(),
      delete: op("delete", { parameters: [param("dryRun"), param("propagationPolicy")] }),
      parameters: [
        { name: "name", in: "path", required: true, schema: { type: "string" } },
        ...(rt.namespaced ? [{ name: "namespace", in: "path", required: true, schema: { type: "string" } }] : []),
      ],
    },
  };
  for (const sub of rt.subresources) {
    // pods/binding is created, never read
    paths[`${base}/{name}/${sub}`] =
      sub === "binding"
        ? { post: op("post", { parameters: writeParams, requestBody: { content: { "*/*": { schema: ref } } } }) }
        : objectOps();
  }
  return paths;
}

/** Component schema of a kind: the CRD schema for CRs, an open object for built-ins. */
function kindSchema(rt: ResourceType, crdSchema: unknown): Obj {
  const gvk = [{ group: rt.group, version: rt.version, kind: rt.kind }];
  const base: Obj = isObj(crdSchema)
    ? structuredClone(crdSchema)
    : { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const props: Obj = isObj(base["properties"]) ? base["properties"] : {};
  props["apiVersion"] = {
    description: "APIVersion defines the versioned schema of this representation of an object.",
    type: "string",
  };
  props["kind"] = {
    description: "Kind is a string value representing the REST resource this object represents.",
    type: "string",
  };
  props["metadata"] = {
    description: "Standard object's metadata.",
    allOf: [{ $ref: `#/components/schemas/${OBJECT_META}` }],
  };
  base["properties"] = props;
  base["type"] = "object";
  base["x-kubernetes-group-version-kind"] = gvk;
  return base;
}

export interface OpenApiDocs {
  root: Obj;
  docs: Map<string, Obj>;
}

/** crdSchemas maps "group/version/plural" to that version's openAPIV3Schema. */
export function buildOpenApi(registry: Registry, crdSchemas: Map<string, unknown>): OpenApiDocs {
  const docs = new Map<string, Obj>();
  const rootPaths: Obj = {};
  for (const gv of registry.groupVersions()) {
    const paths: Obj = {};
    const schemas: Obj = { [OBJECT_META]: OBJECT_META_SCHEMA };
    for (const rt of gv.types) {
      Object.assign(paths, operations(rt));
      if (rt.custom) schemas[schemaName(rt)] = kindSchema(rt, crdSchemas.get(`${rt.group}/${rt.version}/${rt.plural}`));
    }
    const doc: Obj = {
      openapi: "3.0.0",
      info: { title: "Kubernetes", version: "v1.32.3" },
      paths,
      components: { schemas },
    };
    const key = gvPath(gv.group, gv.version);
    docs.set(key, doc);
    const hash = createHash("sha512").update(JSON.stringify(doc)).digest("hex").slice(0, 128).toUpperCase();
    rootPaths[key] = { serverRelativeURL: `/openapi/v3/${key}?hash=${hash}` };
  }
  return { root: { paths: rootPaths }, docs };
}
