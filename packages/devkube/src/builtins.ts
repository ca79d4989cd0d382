import { badRequest, invalid, type FieldCause } from "./errors.ts";
import { coreToEventsV1, eventsV1ToCore } from "./event-conversion.ts";
import { ALL_VERBS, type BuiltinTable, type ResourceType } from "./resource-type.ts";
import { AGE_COLUMN, age, column, humanDuration, NAME_COLUMN } from "./table.ts";
import { isObj, metaOf, str, type Obj } from "./types.ts";

// The built-in kinds devkube serves, with the parts of their registry strategies that clients notice.

export function base(
  group: string,
  version: string,
  kind: string,
  plural: string,
  namespaced: boolean,
  extra: Partial<ResourceType>,
): ResourceType {
  return {
    group,
    version,
    kind,
    listKind: `${kind}List`,
    plural,
    singular: kind.toLowerCase(),
    namespaced,
    shortNames: [],
    categories: [],
    storageKey: `${group}/${plural}`,
    subresources: [],
    verbs: ALL_VERBS,
    custom: false,
    generation: false,
    kindKey: group ? `${group}/${version}/${kind}` : `${version}/${kind}`,
    ...extra,
  };
}

const OBJECT_REFERENCE = ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"];
const POLICY_RULE = ["verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"];
const SUBJECT = ["kind", "apiGroup", "name", "namespace"];

export function known(...fields: string[]): Set<string> {
  return new Set(["apiVersion", "kind", "metadata", ...fields]);
}

function dataCount(obj: Obj): number {
  let n = 0;
  for (const k of ["data", "binaryData"]) if (isObj(obj[k])) n += Object.keys(obj[k]).length;
  return n;
}

const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
const MAX_DATA = 1024 * 1024;

function validateKeys(kind: string, obj: Obj, fields: string[]): void {
  const causes: FieldCause[] = [];
  let size = 0;
  for (const f of fields) {
    const data = obj[f];
    if (data === undefined || data === null) continue;
    if (!isObj(data))
      throw badRequest(
        `${kind} in version "v1" cannot be handled as a ${kind}: json: cannot unmarshal ${Array.isArray(data) ? "array" : typeof data} into Go struct field ${kind}.${f} of type map[string]string`,
      );
    for (const [k, v] of Object.entries(data)) {
      if (typeof v !== "string")
        throw badRequest(
          `${kind} in version "v1" cannot be handled as a ${kind}: json: cannot unmarshal ${typeof v} into Go struct field ${kind}.${f} of type string`,
        );
      size += k.length + v.length;
      if (!CONFIG_KEY.test(k) || k.length > 253) {
        causes.push({
          type: "FieldValueInvalid",
          field: `${f}[${k}]`,
          message: `Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
        });
      }
    }
  }
  if (size > MAX_DATA)
    causes.push({ type: "FieldValueTooLong", field: "", message: `Too long: must have at most ${MAX_DATA} bytes` });
  const name = String(metaOf(obj)["name"] ?? "");
  if (causes.length > 0) throw invalid(kind, "", name, causes);
}

function checkImmutable(kind: string, obj: Obj, old: Obj | undefined, fields: string[]): void {
  if (!old || old["immutable"] !== true) return;
  const name = String(metaOf(obj)["name"] ?? "");
  const causes: FieldCause[] = [];
  for (const f of fields) {
    if (JSON.stringify(obj[f] ?? {}) !== JSON.stringify(old[f] ?? {}))
      causes.push({
        type: "FieldValueForbidden",
        field: f,
        message: "Forbidden: field is immutable when `immutable` is set",
      });
  }
  if (obj["immutable"] !== true)
    causes.push({
      type: "FieldValueForbidden",
      field: "immutable",
      message: "Forbidden: field is immutable when `immutable` is set",
    });
  if (causes.length > 0) throw invalid(kind, "", name, causes);
}

/** Go's base64.StdEncoding strictness, with its error wording. */
function checkBase64(value: string): number | undefined {
  const alphabet = /[A-Za-z0-9+/]/;
  let i = 0;
  for (; i < value.length; i++) {
    const ch = value[i] as string;
    if (ch === "\n" || ch === "\r") continue;
    if (ch === "=") break;
    if (!alphabet.test(ch)) return i;
  }
  const rest = value.slice(i);
  if (!/^={0,2}$/.test(rest)) return i;
  if (value.replace(/[\r\n]/g, "").length % 4 !== 0)
    return value.length - (value.length % 4 || 4) + (rest.length > 0 ? 0 : 0);
  return undefined;
}

const MICRO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

/** metav1.MicroTime decoding: exactly six fractional digits, like Go's layout "…05.000000Z07:00". */
function checkMicroTime(kind: string, value: unknown): void {
  if (value === undefined || value === null) return;
  const prefix = `${kind} in version "v1" cannot be handled as a ${kind}:`;
  if (typeof value !== "string") throw badRequest(`${prefix} unable to decode MicroTime`);
  if (MICRO.test(value)) return;
  const layout = "2006-01-02T15:04:05.000000Z07:00";
  const rest = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(value) ? value.slice(19) : value;
  throw badRequest(`${prefix} parsing time "${value}" as "${layout}": cannot parse "${rest}" as ".000000"`);
}

/** metav1.Time: RFC 3339; stored with whole seconds. */
function normalizeTime(kind: string, obj: Obj, field: string): void {
  const v = obj[field];
  if (v === undefined || v === null) return;
  if (typeof v !== "string" || Number.isNaN(Date.parse(v)) || !/^\d{4}-\d{2}-\d{2}T/.test(v)) {
    throw badRequest(
      `${kind} in version "v1" cannot be handled as a ${kind}: parsing time "${String(v)}" as "2006-01-02T15:04:05Z07:00": cannot parse "${String(v)}" as "2006"`,
    );
  }
  obj[field] = new Date(v).toISOString().replace(/\.\d+Z$/, "Z");
}

/** The keys kube requires for the well-known Secret types (ValidateSecret). */
function checkSecretType(o: Obj, name: string): void {
  const data = isObj(o["data"]) ? o["data"] : {};
  const required: Record<string, string[]> = {
    "kubernetes.io/tls": ["tls.crt", "tls.key"],
    "kubernetes.io/dockerconfigjson": [".dockerconfigjson"],
    "kubernetes.io/dockercfg": [".dockercfg"],
    "kubernetes.io/ssh-auth": ["ssh-privatekey"],
  };
  const causes: FieldCause[] = (required[String(o["type"])] ?? [])
    .filter((k) => !(k in data))
    .map((k) => ({ type: "FieldValueRequired", field: `data[${k}]`, message: "Required value" }));
  if (o["type"] === "kubernetes.io/basic-auth" && !("username" in data) && !("password" in data)) {
    causes.push({ type: "FieldValueRequired", field: "data[username]", message: "Required value" });
  }
  if (o["type"] === "kubernetes.io/service-account-token") {
    const annotations = isObj(metaOf(o)["annotations"]) ? (metaOf(o)["annotations"] as Obj) : {};
    if (!annotations["kubernetes.io/service-account.name"])
      causes.push({
        type: "FieldValueRequired",
        field: "metadata.annotations[kubernetes.io/service-account.name]",
        message: "Required value",
      });
  }
  if (causes.length > 0) throw invalid("Secret", "", name, causes);
}

const SECRET_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Type", "string", "The type of the secret"),
    column("Data", "string", "The number of entries in the data"),
    AGE_COLUMN,
  ],
  cells: (o, now) => [metaOf(o)["name"], o["type"] ?? "", dataCount(o), age(o, now)],
};

const EVENT_FIELDS = [
  "involvedObject.kind",
  "involvedObject.namespace",
  "involvedObject.name",
  "involvedObject.uid",
  "involvedObject.apiVersion",
  "involvedObject.resourceVersion",
  "involvedObject.fieldPath",
  "reason",
  "reportingComponent",
  "source",
  "type",
];

function eventField(o: Obj, field: string): string | undefined {
  const io = isObj(o["involvedObject"]) ? o["involvedObject"] : {};
  if (field.startsWith("involvedObject.")) return String(io[field.slice("involvedObject.".length)] ?? "");
  if (field.startsWith("regarding.")) return String(io[field.slice("regarding.".length)] ?? "");
  if (field === "source") return String((isObj(o["source"]) ? o["source"]["component"] : undefined) ?? "");
  return String(o[field] ?? "");
}

function eventTable(): BuiltinTable {
  return {
    columns: [
      column("Last Seen", "string", "Time when this Event was last seen"),
      column("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future."),
      column(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
      ),
      column("Object", "string", "The object that this event is about."),
      column("Message", "string", "A human-readable description of the status of this operation."),
    ],
    // cells read both forms: core/v1 and events.k8s.io/v1 (regarding, note, deprecated*)
    cells: (o, now) => {
      const ref = isObj(o["involvedObject"]) ? o["involvedObject"] : isObj(o["regarding"]) ? o["regarding"] : {};
      const last =
        str(o["lastTimestamp"]) ??
        str(o["deprecatedLastTimestamp"]) ??
        str(o["eventTime"]) ??
        str(metaOf(o)["creationTimestamp"]);
      const seen = last ? humanDuration(now.getTime() - Date.parse(last)) : "<unknown>";
      return [
        seen,
        o["type"] ?? "",
        o["reason"] ?? "",
        `${String(ref["kind"] ?? "").toLowerCase()}/${String(ref["name"] ?? "")}`,
        o["message"] ?? o["note"] ?? "",
      ];
    },
  };
}

function prepareEventsV1(obj: Obj, operation: "create" | "update"): void {
  const name = String(metaOf(obj)["name"] ?? "");
  const causes: FieldCause[] = [];
  const required = (field: string) => {
    if (obj[field] === undefined || obj[field] === "")
      causes.push({ type: "FieldValueRequired", field, message: "Required value" });
  };
  if (operation === "create") {
    required("eventTime");
    required("reportingController");
    required("reportingInstance");
    required("action");
    required("reason");
  }
  if (obj["type"] !== "Normal" && obj["type"] !== "Warning") {
    causes.push({
      type: "FieldValueInvalid",
      field: "type",
      message: `Invalid value: "${String(obj["type"] ?? "")}": has invalid value: ${String(obj["type"] ?? "")}`,
    });
  }
  if (causes.length > 0) throw invalid("Event", "events.k8s.io", name, causes);
}

function prepareCoreEvent(o: Obj): void {
  if (!isObj(o["involvedObject"])) o["involvedObject"] = {};
  for (const f of ["firstTimestamp", "lastTimestamp"]) normalizeTime("Event", o, f);
  checkMicroTime("Event", o["eventTime"]);
  if (isObj(o["series"])) checkMicroTime("Event", o["series"]["lastObservedTime"]);
  if (o["type"] === undefined) o["type"] = "Normal";
}

const RBAC_CREATED_AT: BuiltinTable = {
  columns: [NAME_COLUMN, { name: "Created At", type: "date", format: "", description: "", priority: 0 }],
  cells: (o) => [metaOf(o)["name"], metaOf(o)["creationTimestamp"]],
};
const BINDING_TABLE: BuiltinTable = {
  columns: [NAME_COLUMN, column("Role"), AGE_COLUMN],
  cells: (o, now) => {
    const r = isObj(o["roleRef"]) ? o["roleRef"] : {};
    return [metaOf(o)["name"], `${String(r["kind"] ?? "")}/${String(r["name"] ?? "")}`, age(o, now)];
  },
};

export function builtinResourceTypes(): ResourceType[] {
  const rbac = "rbac.authorization.k8s.io";
  return [
    base("", "v1", "Namespace", "namespaces", false, {
      shortNames: ["ns"],
      subresources: ["status"],
      deleteReturnsObject: true,
      verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
      knownFields: known("spec", "status"),
      nestedKnownFields: { spec: ["finalizers"], status: ["phase", "conditions"] },
      fieldSelectorKeys: ["status.phase"],
      fieldSelector: (o, f) =>
        f === "status.phase" && isObj(o["status"]) ? String(o["status"]["phase"] ?? "") : undefined,
      table: {
        columns: [NAME_COLUMN, column("Status", "string", "The status of the namespace"), AGE_COLUMN],
        cells: (o, now) => [metaOf(o)["name"], isObj(o["status"]) ? o["status"]["phase"] : "", age(o, now)],
      },
      prepare: (o, ctx) => {
        const meta = metaOf(o);
        const labels = isObj(meta["labels"]) ? meta["labels"] : {};
        labels["kubernetes.io/metadata.name"] = meta["name"];
        meta["labels"] = labels;
        if (ctx.operation === "create") {
          o["spec"] = { finalizers: ["kubernetes"] };
          o["status"] = { phase: "Active" };
        } else if (ctx.old) {
          o["spec"] = ctx.old["spec"];
        }
      },
    }),
    base("", "v1", "ConfigMap", "configmaps", true, {
      shortNames: ["cm"],
      knownFields: known("data", "binaryData", "immutable"),
      table: {
        columns: [NAME_COLUMN, column("Data", "string", "Number of data entries"), AGE_COLUMN],
        cells: (o, now) => [metaOf(o)["name"], dataCount(o), age(o, now)],
      },
      prepare: (o, ctx) => {
        validateKeys("ConfigMap", o, ["data"]);
        if (o["binaryData"] !== undefined) validateKeys("ConfigMap", o, ["binaryData"]);
        checkImmutable("ConfigMap", o, ctx.old, ["data", "binaryData"]);
      },
    }),
    base("", "v1", "Secret", "secrets", true, {
      knownFields: known("data", "stringData", "type", "immutable"),
      table: SECRET_TABLE,
      fieldSelectorKeys: ["type"],
      fieldSelector: (o, f) => (f === "type" ? String(o["type"] ?? "") : undefined),
      prepare: (o, ctx) => {
        const name = String(metaOf(o)["name"] ?? "");
        if (o["data"] !== undefined && o["data"] !== null && isObj(o["data"])) {
          for (const v of Object.values(o["data"])) {
            if (typeof v !== "string")
              throw badRequest(
                `Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal ${typeof v} into Go struct field Secret.data of type []uint8`,
              );
            const at = checkBase64(v);
            if (at !== undefined)
              throw badRequest(
                `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${at}`,
              );
          }
        }
        if (o["stringData"] !== undefined && o["stringData"] !== null) {
          validateKeys("Secret", o, ["stringData"]);
          const data = isObj(o["data"]) ? o["data"] : {};
          for (const [k, v] of Object.entries(o["stringData"] as Obj))
            data[k] = Buffer.from(String(v), "utf8").toString("base64");
          o["data"] = data;
        }
        delete o["stringData"];
        if (o["type"] === undefined || o["type"] === "") o["type"] = "Opaque";
        if (ctx.old && ctx.old["type"] !== o["type"])
          throw invalid("Secret", "", name, [
            {
              type: "FieldValueInvalid",
              field: "type",
              message: `Invalid value: "${String(o["type"])}": field is immutable`,
            },
          ]);
        validateKeys("Secret", o, ["data"]);
        checkSecretType(o, name);
        checkImmutable("Secret", o, ctx.old, ["data"]);
      },
    }),
    base("", "v1", "ServiceAccount", "serviceaccounts", true, {
      shortNames: ["sa"],
      deleteReturnsObject: true,
      subresources: ["token"],
      knownFields: known("secrets", "imagePullSecrets", "automountServiceAccountToken"),
      nestedKnownFields: { "secrets[]": OBJECT_REFERENCE, "imagePullSecrets[]": ["name"] },
      table: {
        columns: [
          NAME_COLUMN,
          column(
            "Secrets",
            "string",
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
          ),
          AGE_COLUMN,
        ],
        cells: (o, now) => [metaOf(o)["name"], Array.isArray(o["secrets"]) ? o["secrets"].length : 0, age(o, now)],
      },
    }),
    base("", "v1", "Event", "events", true, {
      shortNames: ["ev"],
      storageKey: "/events",
      knownFields: known(
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
      ),
      nestedKnownFields: {
        involvedObject: OBJECT_REFERENCE,
        related: OBJECT_REFERENCE,
        source: ["component", "host"],
        series: ["count", "lastObservedTime"],
      },
      fieldSelectorKeys: EVENT_FIELDS,
      fieldSelector: eventField,
      table: eventTable(),
      prepare: (o) => prepareCoreEvent(o),
    }),
    base("events.k8s.io", "v1", "Event", "events", true, {
      shortNames: ["ev"],
      storageKey: "/events",
      knownFields: known(
        "eventTime",
        "series",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "regarding",
        "related",
        "note",
        "type",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
      ),
      nestedKnownFields: {
        regarding: OBJECT_REFERENCE,
        related: OBJECT_REFERENCE,
        deprecatedSource: ["component", "host"],
        series: ["count", "lastObservedTime"],
      },
      fieldSelectorKeys: [
        ...EVENT_FIELDS,
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reportingController",
      ],
      fieldSelector: (o, f) => eventField(o, f === "reportingController" ? "reportingComponent" : f),
      table: eventTable(),
      toStorage: eventsV1ToCore,
      fromStorage: coreToEventsV1,
      prepare: (o, ctx) => {
        // runs on the events.k8s.io form, before conversion to storage
        prepareEventsV1(o, ctx.operation);
        checkMicroTime("Event", o["eventTime"]);
        if (isObj(o["series"])) checkMicroTime("Event", o["series"]["lastObservedTime"]);
      },
    }),
    base("coordination.k8s.io", "v1", "Lease", "leases", true, {
      knownFields: known("spec"),
      nestedKnownFields: {
        spec: [
          "holderIdentity",
          "leaseDurationSeconds",
          "acquireTime",
          "renewTime",
          "leaseTransitions",
          "strategy",
          "preferredHolder",
        ],
      },
      table: {
        columns: [NAME_COLUMN, column("Holder", "string", "The holder of the lease"), AGE_COLUMN],
        cells: (o, now) => [
          metaOf(o)["name"],
          isObj(o["spec"]) ? (o["spec"]["holderIdentity"] ?? "") : "",
          age(o, now),
        ],
      },
      prepare: (o) => {
        const spec = o["spec"];
        if (spec === undefined || spec === null) return;
        if (!isObj(spec))
          throw badRequest(
            `Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal ${typeof spec} into Go struct field Lease.spec of type v1.LeaseSpec`,
          );
        checkMicroTime("Lease", spec["acquireTime"]);
        checkMicroTime("Lease", spec["renewTime"]);
        const d = spec["leaseDurationSeconds"];
        if (d !== undefined && d !== null && (typeof d !== "number" || !Number.isInteger(d)))
          throw badRequest(
            `Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal ${typeof d} into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32`,
          );
        if (typeof d === "number" && d <= 0)
          throw invalid("Lease", "coordination.k8s.io", String(metaOf(o)["name"] ?? ""), [
            {
              type: "FieldValueInvalid",
              field: "spec.leaseDurationSeconds",
              message: `Invalid value: ${d}: must be greater than 0`,
            },
          ]);
      },
    }),
    base("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false, {
      verbs: ["create"],
      knownFields: known("status"),
    }),
    base("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false, {
      verbs: ["create"],
      knownFields: known("spec", "status"),
    }),
    base("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false, {
      verbs: ["create"],
      knownFields: known("spec", "status"),
    }),
    base(rbac, "v1", "Role", "roles", true, {
      knownFields: known("rules"),
      nestedKnownFields: { "rules[]": POLICY_RULE },
      table: RBAC_CREATED_AT,
    }),
    base(rbac, "v1", "ClusterRole", "clusterroles", false, {
      knownFields: known("rules", "aggregationRule"),
      nestedKnownFields: { "rules[]": POLICY_RULE, aggregationRule: ["clusterRoleSelectors"] },
      table: RBAC_CREATED_AT,
    }),
    base(rbac, "v1", "RoleBinding", "rolebindings", true, {
      knownFields: known("subjects", "roleRef"),
      nestedKnownFields: { "subjects[]": SUBJECT, roleRef: ["apiGroup", "kind", "name"] },
      table: BINDING_TABLE,
    }),
    base(rbac, "v1", "ClusterRoleBinding", "clusterrolebindings", false, {
      knownFields: known("subjects", "roleRef"),
      nestedKnownFields: { "subjects[]": SUBJECT, roleRef: ["apiGroup", "kind", "name"] },
      table: BINDING_TABLE,
    }),
  ];
}

export function crdBaseType(): ResourceType {
  return base("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false, {
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    subresources: ["status"],
    generation: true,
    knownFields: known("spec", "status"),
    nestedKnownFields: {
      spec: ["group", "names", "scope", "versions", "conversion", "preserveUnknownFields"],
      "spec.names": ["plural", "singular", "shortNames", "kind", "listKind", "categories"],
      "spec.versions[]": [
        "name",
        "served",
        "storage",
        "deprecated",
        "deprecationWarning",
        "schema",
        "subresources",
        "additionalPrinterColumns",
        "selectableFields",
      ],
      "spec.versions[].schema": ["openAPIV3Schema"],
      "spec.versions[].subresources": ["status", "scale"],
      "spec.versions[].subresources.scale": ["specReplicasPath", "statusReplicasPath", "labelSelectorPath"],
      "spec.versions[].additionalPrinterColumns[]": ["name", "type", "format", "description", "priority", "jsonPath"],
      "spec.versions[].selectableFields[]": ["jsonPath"],
      "spec.conversion": ["strategy", "webhook"],
    },
    table: {
      columns: [NAME_COLUMN, { name: "Created At", type: "date", format: "", description: "", priority: 0 }],
      cells: (o) => [metaOf(o)["name"], metaOf(o)["creationTimestamp"]],
    },
  });
}
