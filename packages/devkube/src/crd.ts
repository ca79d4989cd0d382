import type { ConversionWebhooks } from "./conversion-webhook.ts";
import { invalid, type FieldCause } from "./errors.ts";
import { evaluateJsonPath } from "./jsonpath.ts";
import { ALL_VERBS, type PrinterColumn, type ResourceType } from "./resource-type.ts";
import { compileSchema, errorBody, SchemaError, type CompiledSchema } from "./schema/index.ts";
import { isObj, metaOf, str, timeNow, type Obj } from "./types.ts";

// CustomResourceDefinition handling: validation of the CRD itself, its status, and the resource
// types it serves.

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io";

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema?: unknown;
  subresources?: Obj;
  additionalPrinterColumns?: PrinterColumn[];
  selectableFields?: { jsonPath: string }[];
  deprecated?: boolean;
  deprecationWarning?: string;
}

function versionsOf(crd: Obj): CrdVersion[] {
  const spec = isObj(crd["spec"]) ? crd["spec"] : {};
  return Array.isArray(spec["versions"]) ? (spec["versions"].filter(isObj) as unknown as CrdVersion[]) : [];
}

const schemaCache = new WeakMap<object, CompiledSchema>();
const compiledByText = new Map<string, CompiledSchema>();

function compile(schema: unknown): CompiledSchema {
  const key = JSON.stringify(schema);
  let c = compiledByText.get(key);
  if (!c) {
    c = compileSchema(schema);
    compiledByText.set(key, c);
  }
  if (isObj(schema)) schemaCache.set(schema, c);
  return c;
}

/** Validates a CRD the way apiextensions-apiserver does for the mistakes people actually make; throws 422. */
export function validateCrd(crd: Obj, old: Obj | undefined): void {
  const name = String(metaOf(crd)["name"] ?? "");
  const spec = isObj(crd["spec"]) ? crd["spec"] : {};
  const names = isObj(spec["names"]) ? spec["names"] : {};
  const group = str(spec["group"]) ?? "";
  const plural = str(names["plural"]) ?? "";
  const causes: FieldCause[] = [];
  if (!group) causes.push({ type: "FieldValueRequired", field: "spec.group", message: "Required value" });
  else if (!group.includes("."))
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.group",
      message: `Invalid value: "${group}": should be a domain with at least one dot`,
    });
  if (!plural) causes.push({ type: "FieldValueRequired", field: "spec.names.plural", message: "Required value" });
  else if (!DNS_LABEL.test(plural))
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.names.plural",
      message: `Invalid value: "${plural}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
    });
  if (!str(names["kind"]))
    causes.push({ type: "FieldValueRequired", field: "spec.names.kind", message: "Required value" });
  const singular = str(names["singular"]);
  if (singular !== undefined && !DNS_LABEL.test(singular))
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.names.singular",
      message: `Invalid value: "${singular}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
    });
  if (plural && group && name !== `${plural}.${group}`)
    causes.push({
      type: "FieldValueInvalid",
      field: "metadata.name",
      message: `Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
    });
  const scope = spec["scope"];
  if (scope !== "Namespaced" && scope !== "Cluster")
    causes.push({
      type: "FieldValueNotSupported",
      field: "spec.scope",
      message: `Unsupported value: "${String(scope ?? "")}": supported values: "Cluster", "Namespaced"`,
    });
  const versions = versionsOf(crd);
  if (versions.length === 0)
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.versions",
      message: "Invalid value: null: must have exactly one version marked as storage version",
    });
  else if (versions.filter((v) => v.storage === true).length !== 1)
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.versions",
      message: `Invalid value: ${JSON.stringify(versions.map((v) => v.name))}: must have exactly one version marked as storage version`,
    });
  const seen = new Set<string>();
  versions.forEach((v, i) => {
    const field = `spec.versions[${i}]`;
    if (!v.name || !DNS_LABEL.test(v.name))
      causes.push({
        type: "FieldValueInvalid",
        field: `${field}.name`,
        message: `Invalid value: "${String(v.name ?? "")}": a DNS-1035 label must consist of lower case alphanumeric characters or '-'`,
      });
    if (seen.has(v.name))
      causes.push({ type: "FieldValueDuplicate", field: `${field}.name`, message: `Duplicate value: "${v.name}"` });
    seen.add(v.name);
    const schema = isObj(v.schema) ? v.schema["openAPIV3Schema"] : undefined;
    if (!isObj(schema)) {
      causes.push({
        type: "FieldValueRequired",
        field: `${field}.schema.openAPIV3Schema`,
        message: "Required value: schemas are required",
      });
      return;
    }
    try {
      compile(schema);
    } catch (err) {
      if (err instanceof SchemaError) {
        const errs =
          err.errors.length > 0
            ? err.errors
            : [{ type: "FieldValueInvalid" as const, field: "", message: err.message }];
        for (const e of errs)
          causes.push({
            type: e.type,
            field: e.field ? `${field}.schema.openAPIV3Schema.${e.field}` : `${field}.schema.openAPIV3Schema`,
            message: errorBody(e),
          });
      } else {
        causes.push({
          type: "FieldValueInvalid",
          field: `${field}.schema.openAPIV3Schema`,
          message: `Invalid value: ${(err as Error).message}`,
        });
      }
    }
  });
  if (versions.length > 0 && !versions.some((v) => v.served))
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.versions",
      message: "Invalid value: must have at least one served version",
    });
  if (old) {
    const oldSpec = isObj(old["spec"]) ? old["spec"] : {};
    if (oldSpec["scope"] !== spec["scope"])
      causes.push({
        type: "FieldValueInvalid",
        field: "spec.scope",
        message: `Invalid value: "${String(spec["scope"])}": field is immutable`,
      });
    if (oldSpec["group"] !== spec["group"])
      causes.push({
        type: "FieldValueInvalid",
        field: "spec.group",
        message: `Invalid value: "${group}": field is immutable`,
      });
  }
  if (causes.length > 0) throw invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes);
}

/** Fills CRD defaults the API server applies (conversion strategy, singular, listKind). */
export function defaultCrd(crd: Obj): void {
  const spec = isObj(crd["spec"]) ? crd["spec"] : {};
  const names = isObj(spec["names"]) ? spec["names"] : {};
  if (!names["singular"] && typeof names["kind"] === "string") names["singular"] = names["kind"].toLowerCase();
  if (!names["listKind"] && typeof names["kind"] === "string") names["listKind"] = `${names["kind"]}List`;
  if (!isObj(spec["conversion"])) spec["conversion"] = { strategy: "None" };
  for (const v of versionsOf(crd)) {
    for (const c of v.additionalPrinterColumns ?? []) if (c.priority === undefined) c.priority = 0;
  }
}

/**
 * status.storedVersions as a client writes it through /status (what a storage migration does once every object is
 * rewritten): refused as kube-apiserver refuses it unless every entry is a version of the CRD and the storage
 * version is among them.
 */
function writtenStoredVersions(crd: Obj, written: unknown): string[] {
  const name = String(metaOf(crd)["name"]);
  const versions = versionsOf(crd).map((v) => v.name);
  const storage = versionsOf(crd).find((v) => v.storage)?.name;
  const list = Array.isArray(written) ? written.map(String) : [];
  const goList = `[]string{${list.map((v) => JSON.stringify(v)).join(", ")}}`;
  const causes: FieldCause[] = [];
  if (list.length === 0)
    causes.push({
      type: "FieldValueInvalid",
      field: "status.storedVersions",
      message: `Invalid value: ${goList}: must have at least one stored version`,
    });
  list.forEach((v, i) => {
    if (!versions.includes(v))
      causes.push({
        type: "FieldValueInvalid",
        field: `status.storedVersions[${i}]`,
        message: `Invalid value: "${v}": must appear in spec.versions`,
      });
  });
  if (list.length > 0 && storage !== undefined && !list.includes(storage))
    causes.push({
      type: "FieldValueInvalid",
      field: "status.storedVersions",
      message: `Invalid value: ${goList}: must have the storage version ${storage}`,
    });
  if (causes.length > 0) throw invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes);
  return list;
}

/**
 * A spec write keeps the stored versions: kube-apiserver refuses a CRD whose spec.versions drops one of them (a
 * storage migration must remove it from status.storedVersions first), so an older release's CRDs cannot replace
 * newer ones that stored objects in a version they lack.
 */
function keptStoredVersions(crd: Obj, stored: string[]): string[] {
  const versions = versionsOf(crd).map((v) => v.name);
  const causes: FieldCause[] = stored.flatMap((v, i) =>
    versions.includes(v)
      ? []
      : [
          {
            type: "FieldValueInvalid" as const,
            field: `status.storedVersions[${i}]`,
            message: `Invalid value: "${v}": missing from spec.versions; ${v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in ${v} and removes ${v} from status.storedVersions`,
          },
        ],
  );
  if (causes.length > 0)
    throw invalid("CustomResourceDefinition", "apiextensions.k8s.io", String(metaOf(crd)["name"]), causes);
  return stored;
}

/**
 * The status the API server's controllers settle on: names accepted, established (or terminating). storedVersions
 * only grows with the storage version, except through a /status write (`written`), which may drop versions.
 */
export function crdStatus(crd: Obj, old: Obj | undefined, written?: { storedVersions: unknown }): Obj {
  const spec = isObj(crd["spec"]) ? crd["spec"] : {};
  const names = isObj(spec["names"]) ? { ...spec["names"] } : {};
  const stored = new Set<string>(
    written
      ? writtenStoredVersions(crd, written.storedVersions)
      : isObj(old?.["status"]) && Array.isArray(old["status"]["storedVersions"])
        ? keptStoredVersions(crd, old["status"]["storedVersions"] as string[])
        : [],
  );
  for (const v of versionsOf(crd)) if (v.storage) stored.add(v.name);
  const now = timeNow();
  const oldConds =
    isObj(old?.["status"]) && Array.isArray(old["status"]["conditions"]) ? (old["status"]["conditions"] as Obj[]) : [];
  const since = (type: string, status: string) => {
    const prev = oldConds.find((c) => c["type"] === type);
    return prev && prev["status"] === status ? prev["lastTransitionTime"] : now;
  };
  const conditions: Obj[] = [
    {
      type: "NamesAccepted",
      status: "True",
      lastTransitionTime: since("NamesAccepted", "True"),
      reason: "NoConflicts",
      message: "no conflicts found",
    },
    {
      type: "Established",
      status: "True",
      lastTransitionTime: since("Established", "True"),
      reason: "InitialNamesAccepted",
      message: "the initial names have been accepted",
    },
  ];
  if (metaOf(crd)["deletionTimestamp"]) {
    conditions.push({
      type: "Terminating",
      status: "True",
      lastTransitionTime: since("Terminating", "True"),
      reason: "InstanceDeletionInProgress",
      message: "CustomResource deletion is in progress",
    });
  }
  return { conditions, acceptedNames: names, storedVersions: [...stored] };
}

/** The resource types one CRD serves (one per served version). */
export function crdResourceTypes(crd: Obj, webhooks?: ConversionWebhooks): ResourceType[] {
  const spec = isObj(crd["spec"]) ? crd["spec"] : {};
  const names = isObj(spec["names"]) ? spec["names"] : {};
  const group = String(spec["group"]);
  const kind = String(names["kind"]);
  const plural = String(names["plural"]);
  const storage = versionsOf(crd).find((v) => v.storage)?.name;
  const conversion = isObj(spec["conversion"]) ? spec["conversion"] : {};
  const webhook = isObj(conversion["webhook"]) ? conversion["webhook"] : {};
  const clientConfig = isObj(webhook["clientConfig"]) ? webhook["clientConfig"] : undefined;
  // strategy Webhook: every object is stored in the storage version and served in the one asked for, converted by
  // the webhook whenever the two differ (kube-apiserver never calls it for the same version).
  const convertTo = (apiVersion: string) => (obj: Obj) =>
    obj["apiVersion"] === apiVersion || !webhooks || !clientConfig
      ? obj
      : webhooks.convert({ clientConfig, crdName: String(metaOf(crd)["name"]) }, [obj], apiVersion)[0]!;
  const viaWebhook = conversion["strategy"] === "Webhook" && storage !== undefined;
  return versionsOf(crd)
    .filter((v) => v.served)
    .map((v) => {
      const schemaDoc = isObj(v.schema) ? v.schema["openAPIV3Schema"] : undefined;
      const subs = isObj(v.subresources) ? v.subresources : {};
      const subresources = [...(isObj(subs["status"]) ? ["status"] : []), ...(isObj(subs["scale"]) ? ["scale"] : [])];
      const scaleDef = isObj(subs["scale"]) ? subs["scale"] : undefined;
      const selectable = (v.selectableFields ?? []).map((f) => f.jsonPath.replace(/^\./, ""));
      const rt: ResourceType = {
        group,
        version: v.name,
        kind,
        listKind: str(names["listKind"]) ?? `${kind}List`,
        plural,
        singular: str(names["singular"]) ?? kind.toLowerCase(),
        namespaced: spec["scope"] === "Namespaced",
        shortNames: Array.isArray(names["shortNames"]) ? (names["shortNames"] as string[]) : [],
        categories: Array.isArray(names["categories"]) ? (names["categories"] as string[]) : [],
        storageKey: `${group}/${plural}`,
        subresources,
        verbs: ALL_VERBS,
        custom: true,
        generation: true,
        kindKey: `${group}/${v.name}/${kind}`,
        printerColumns: v.additionalPrinterColumns ?? [],
        crdName: String(metaOf(crd)["name"]),
        fieldSelectorKeys: selectable,
        fieldSelector: (o, f) => {
          const vals = evaluateJsonPath(`.${f}`, o);
          return vals.length > 0 ? String(vals[0]) : "";
        },
        ...(v.deprecated
          ? { deprecationWarning: v.deprecationWarning ?? `${group}/${v.name} ${kind} is deprecated` }
          : {}),
        ...(viaWebhook
          ? { toStorage: convertTo(`${group}/${storage}`), fromStorage: convertTo(`${group}/${v.name}`) }
          : {}),
      };
      if (
        scaleDef &&
        typeof scaleDef["specReplicasPath"] === "string" &&
        typeof scaleDef["statusReplicasPath"] === "string"
      ) {
        rt.scale = {
          specReplicasPath: scaleDef["specReplicasPath"],
          statusReplicasPath: scaleDef["statusReplicasPath"],
          ...(typeof scaleDef["labelSelectorPath"] === "string"
            ? { labelSelectorPath: scaleDef["labelSelectorPath"] }
            : {}),
        };
      }
      if (schemaDoc !== undefined) {
        try {
          rt.schema = compile(schemaDoc);
        } catch {
          // a stored CRD whose schema no longer compiles is served without validation
        }
      }
      return rt;
    });
}
