// Validates rendered manifests against Kubernetes' published API schemas, offline, in two passes:
// 1. kubernetes-models: JSON schemas compiled from the Kubernetes OpenAPI spec (types, formats, required fields);
// 2. @kubernetes/client-node's generated models (OpenAPI release-1.36): every field must exist in the API,
//    as `kubectl apply --validate=strict` would insist (the JSON schemas accept unknown fields).
import * as clientNode from "@kubernetes/client-node";

interface Attribute {
  baseName: string;
  type: string;
}
type ModelClass = { attributeTypeMap?: Attribute[] };
type ValidatingModel = new (data: unknown) => { validate(): void };

const models = clientNode as unknown as Record<string, ModelClass | undefined>;

export interface KubeObjectLike {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string; namespace?: string };
}

export const describeObject = (o: KubeObjectLike) => `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name ?? "?"}`;

/** Problems of `obj` against the Kubernetes schemas; empty when it is valid. */
export async function validateKubernetesObject(obj: KubeObjectLike): Promise<string[]> {
  const problems: string[] = [];
  // kubernetes-models exposes one module per apiVersion ("v1", "apps/v1", "rbac.authorization.k8s.io/v1", ...).
  let module: Record<string, unknown>;
  try {
    module = (await import(`kubernetes-models/${obj.apiVersion}`)) as Record<string, unknown>;
  } catch (err) {
    return [`${describeObject(obj)}: unknown apiVersion ${obj.apiVersion} (${(err as Error).message})`];
  }
  const Model = module[obj.kind] as ValidatingModel | undefined;
  if (Model === undefined) return [`${describeObject(obj)}: unknown kind ${obj.kind} in ${obj.apiVersion}`];
  try {
    new Model(obj).validate();
  } catch (err) {
    problems.push(`${describeObject(obj)}: ${(err as Error).message}`);
  }
  const version = obj.apiVersion.split("/").at(-1) ?? "";
  const typeName = `${version.charAt(0).toUpperCase()}${version.slice(1)}${obj.kind}`;
  if (models[typeName]?.attributeTypeMap === undefined) problems.push(`${describeObject(obj)}: no client-node model ${typeName}`);
  else for (const field of unknownFields(obj, typeName, "")) problems.push(`${describeObject(obj)}: unknown field ${field}`);
  return problems;
}

// Paths of fields that the model `typeName` (and the models it nests) does not declare.
function unknownFields(value: unknown, typeName: string, path: string): string[] {
  if (value === null || value === undefined) return [];
  const array = /^Array<(.+)>$/.exec(typeName);
  if (array?.[1] !== undefined) {
    if (!Array.isArray(value)) return [];
    const item = array[1];
    return value.flatMap((v, i) => unknownFields(v, item, `${path}[${i}]`));
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(typeName);
  if (map?.[1] !== undefined) {
    if (typeof value !== "object") return [];
    const item = map[1];
    return Object.entries(value).flatMap(([k, v]) => unknownFields(v, item, `${path}.${k}`));
  }
  const attributes = models[typeName]?.attributeTypeMap;
  if (attributes === undefined || typeof value !== "object" || Array.isArray(value)) return [];
  const found: string[] = [];
  for (const [key, child] of Object.entries(value)) {
    const attribute = attributes.find((a) => a.baseName === key);
    const childPath = `${path}.${key}`;
    if (attribute === undefined) {
      found.push(childPath.slice(1));
      continue;
    }
    // JSONSchemaProps declares items and additionalProperties as `any` (schema or bool); walk them as schemas.
    const schemaValued = typeName === "V1JSONSchemaProps" && (key === "items" || key === "additionalProperties");
    const childType = schemaValued && typeof child === "object" && child !== null && !Array.isArray(child) ? "V1JSONSchemaProps" : attribute.type;
    found.push(...unknownFields(child, childType, childPath));
  }
  return found;
}
