import { randomInt } from "node:crypto";
import { base, known } from "./builtins.ts";
import { invalid, type FieldCause } from "./errors.ts";
import type { ListTypes } from "./patch/index.ts";
import type { BuiltinTable, PrepareContext, ResourceType } from "./resource-type.ts";
import { AGE_COLUMN, age, column, NAME_COLUMN } from "./table.ts";
import { isObj, jsonEqual, metaOf, type Obj } from "./types.ts";

// The workload kinds of our install manifests as the API server stores them: defaulting, the checks our manifests
// could get wrong, generation, list merge keys, printer columns. The controllers that run Deployments and
// StatefulSets are in *-controller.ts; nothing binds claims (PVCs stay Pending). Pods, ReplicaSets, DaemonSets,
// Jobs and Nodes are in pod-kinds.ts.

const specOf = (o: Obj): Obj => (isObj(o["spec"]) ? o["spec"] : {});
const statusOf = (o: Obj): Obj => (isObj(o["status"]) ? o["status"] : {});
const nameOf = (o: Obj): string => String(metaOf(o)["name"] ?? "");

/** Server-side-apply list types of a pod template (upstream x-kubernetes-list-map-keys, merge keys as in SMP). */
export function podTemplateListTypes(prefix: string): Record<string, { type: "map"; keys: string[] }> {
  const map = (keys: string[]) => ({ type: "map" as const, keys });
  const out: Record<string, { type: "map"; keys: string[] }> = {
    [`${prefix}.volumes`]: map(["name"]),
    [`${prefix}.imagePullSecrets`]: map(["name"]),
  };
  for (const c of ["containers", "initContainers"]) {
    out[`${prefix}.${c}`] = map(["name"]);
    out[`${prefix}.${c}.env`] = map(["name"]);
    out[`${prefix}.${c}.ports`] = map(["containerPort"]);
    out[`${prefix}.${c}.volumeMounts`] = map(["mountPath"]);
  }
  return out;
}

export function listTypes(table: Record<string, { type: "map"; keys: string[] }>): ListTypes {
  return (path) => table[path.join(".")];
}

/** "a=b,c=d" of a LabelSelector's matchLabels and matchExpressions, as kubectl prints it. */
function formatSelector(sel: unknown): string {
  if (!isObj(sel)) return "<none>";
  const parts: string[] = [];
  if (isObj(sel["matchLabels"]))
    for (const [k, v] of Object.entries(sel["matchLabels"])) parts.push(`${k}=${String(v)}`);
  if (Array.isArray(sel["matchExpressions"])) {
    for (const e of sel["matchExpressions"]) {
      if (!isObj(e)) continue;
      const values = Array.isArray(e["values"]) ? (e["values"] as unknown[]).map(String).join(",") : "";
      const op = String(e["operator"] ?? "");
      if (op === "Exists") parts.push(String(e["key"]));
      else if (op === "DoesNotExist") parts.push(`!${String(e["key"])}`);
      else parts.push(`${String(e["key"])} ${op.toLowerCase()} (${values})`);
    }
  }
  return parts.length === 0 ? "<none>" : parts.join(",");
}

/** apps/v1 ValidateDeploymentSpec / ValidateStatefulSetSpec, the parts a manifest gets wrong: selector and template. */
export function checkPodController(kind: string, o: Obj, ctx: PrepareContext): void {
  const spec = specOf(o);
  const causes: FieldCause[] = [];
  const selector = spec["selector"];
  if (!isObj(selector)) causes.push({ type: "FieldValueRequired", field: "spec.selector", message: "Required value" });
  else if (!isObj(selector["matchLabels"]) && !Array.isArray(selector["matchExpressions"])) {
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.selector",
      message: `Invalid value: "null": empty selector is invalid for ${kind.toLowerCase()}`,
    });
  }
  const template = isObj(spec["template"]) ? spec["template"] : {};
  const labels =
    isObj(template["metadata"]) && isObj(template["metadata"]["labels"]) ? template["metadata"]["labels"] : {};
  if (isObj(selector) && isObj(selector["matchLabels"])) {
    const mismatch = Object.entries(selector["matchLabels"]).some(([k, v]) => labels[k] !== v);
    if (mismatch)
      causes.push({
        type: "FieldValueInvalid",
        field: "spec.template.metadata.labels",
        message: `Invalid value: ${JSON.stringify(labels)}: \`selector\` does not match template \`labels\``,
      });
  }
  const podSpec = isObj(template["spec"]) ? template["spec"] : {};
  if (!Array.isArray(podSpec["containers"]) || podSpec["containers"].length === 0)
    causes.push({ type: "FieldValueRequired", field: "spec.template.spec.containers", message: "Required value" });
  const replicas = spec["replicas"];
  if (typeof replicas === "number" && replicas < 0)
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.replicas",
      message: `Invalid value: ${replicas}: must be greater than or equal to 0`,
    });
  if (ctx.old && !jsonEqual(specOf(ctx.old)["selector"], selector)) {
    causes.push({
      type: "FieldValueInvalid",
      field: "spec.selector",
      message: `Invalid value: ${JSON.stringify(selector ?? null)}: field is immutable`,
    });
  }
  if (causes.length > 0) throw invalid(kind, "apps", nameOf(o), causes);
}

const PERCENT_MESSAGE =
  "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/** An int-or-percent of a rolling update (upstream ValidatePositiveIntOrPercent, IsNotMoreThan100Percent). */
export function intOrPercentCauses(value: unknown, field: string, max100: boolean): FieldCause[] {
  const bad = (message: string): FieldCause[] => [
    { type: "FieldValueInvalid", field, message: `Invalid value: ${JSON.stringify(value)}: ${message}` },
  ];
  if (typeof value === "string") {
    if (!/^[0-9]+%$/.test(value)) return bad(PERCENT_MESSAGE);
    if (max100 && Number(value.slice(0, -1)) > 100) return bad("must not be greater than 100%");
    return [];
  }
  if (typeof value === "number" && Number.isInteger(value))
    return value < 0 ? bad("must be greater than or equal to 0") : [];
  return value === undefined ? [] : bad("must be an integer or a percent string");
}

/** ValidateDeploymentStrategy: the type, and maxSurge/maxUnavailable of a RollingUpdate (not both zero). */
function checkStrategy(o: Obj): void {
  const strategy = isObj(specOf(o)["strategy"]) ? (specOf(o)["strategy"] as Obj) : {};
  const field = "spec.strategy";
  const causes: FieldCause[] = [];
  if (strategy["type"] !== "RollingUpdate" && strategy["type"] !== "Recreate")
    causes.push({
      type: "FieldValueNotSupported",
      field: `${field}.type`,
      message: `Unsupported value: ${JSON.stringify(strategy["type"])}: supported values: "Recreate", "RollingUpdate"`,
    });
  else if (strategy["type"] === "Recreate" && strategy["rollingUpdate"] !== undefined)
    causes.push({
      type: "FieldValueForbidden",
      field: `${field}.rollingUpdate`,
      message: "Forbidden: may not be specified when strategy `type` is 'Recreate'",
    });
  const ru = isObj(strategy["rollingUpdate"]) ? strategy["rollingUpdate"] : undefined;
  if (strategy["type"] === "RollingUpdate" && ru) {
    causes.push(...intOrPercentCauses(ru["maxUnavailable"], `${field}.rollingUpdate.maxUnavailable`, true));
    causes.push(...intOrPercentCauses(ru["maxSurge"], `${field}.rollingUpdate.maxSurge`, false));
    const zero = (v: unknown) => v === 0 || v === "0%";
    if (causes.length === 0 && zero(ru["maxUnavailable"]) && zero(ru["maxSurge"]))
      causes.push({
        type: "FieldValueInvalid",
        field: `${field}.rollingUpdate.maxUnavailable`,
        message: `Invalid value: ${JSON.stringify(ru["maxUnavailable"])}: may not be 0 when \`maxSurge\` is 0`,
      });
  }
  if (causes.length > 0) throw invalid("Deployment", "apps", nameOf(o), causes);
}

export function defaults(target: Obj, values: Obj): void {
  for (const [k, v] of Object.entries(values)) if (target[k] === undefined) target[k] = structuredClone(v);
}

const REPLICAS_READY = (o: Obj): string =>
  `${Number(statusOf(o)["readyReplicas"] ?? 0)}/${Number(specOf(o)["replicas"] ?? 0)}`;

const DEPLOYMENT_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Ready", "string", "Number of the pod with ready state"),
    column(
      "Up-to-date",
      "string",
      "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
    ),
    column(
      "Available",
      "string",
      "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    AGE_COLUMN,
  ],
  cells: (o, now) => [
    nameOf(o),
    REPLICAS_READY(o),
    Number(statusOf(o)["updatedReplicas"] ?? 0),
    Number(statusOf(o)["availableReplicas"] ?? 0),
    age(o, now),
  ],
};

const STATEFULSET_TABLE: BuiltinTable = {
  columns: [NAME_COLUMN, column("Ready", "string", "Number of the pod with ready state"), AGE_COLUMN],
  cells: (o, now) => [nameOf(o), REPLICAS_READY(o), age(o, now)],
};

function servicePorts(o: Obj): string {
  const ports = Array.isArray(specOf(o)["ports"]) ? (specOf(o)["ports"] as unknown[]) : [];
  const out = ports
    .filter(isObj)
    .map(
      (p) =>
        `${String(p["port"])}${p["nodePort"] !== undefined ? `:${String(p["nodePort"])}` : ""}/${String(p["protocol"] ?? "TCP")}`,
    );
  return out.length === 0 ? "<none>" : out.join(",");
}

function externalIp(o: Obj): string {
  const spec = specOf(o);
  const external = Array.isArray(spec["externalIPs"]) ? (spec["externalIPs"] as string[]) : [];
  if (spec["type"] === "ExternalName") return String(spec["externalName"] ?? "");
  if (spec["type"] === "LoadBalancer") {
    const lb = isObj(statusOf(o)["loadBalancer"]) ? (statusOf(o)["loadBalancer"] as Obj) : {};
    const ingress = Array.isArray(lb["ingress"])
      ? lb["ingress"].filter(isObj).map((i) => String(i["ip"] ?? i["hostname"] ?? ""))
      : [];
    const all = [...ingress, ...external];
    return all.length === 0 ? "<pending>" : all.join(",");
  }
  return external.length === 0 ? "<none>" : external.join(",");
}

const SERVICE_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Type", "string", "type determines how the Service is exposed."),
    column("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."),
    column(
      "External-IP",
      "string",
      "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
    ),
    column("Port(s)", "string", "The list of ports that are exposed by this service."),
    AGE_COLUMN,
  ],
  cells: (o, now) => [
    nameOf(o),
    specOf(o)["type"] ?? "",
    specOf(o)["clusterIP"] ?? "<none>",
    externalIp(o),
    servicePorts(o),
    age(o, now),
  ],
};

/** The apiserver's own allocations and defaults (no controller involved): cluster IP, node ports, port protocol. */
function prepareService(o: Obj, ctx: PrepareContext): void {
  const spec = isObj(o["spec"]) ? o["spec"] : {};
  o["spec"] = spec;
  const old = ctx.old ? specOf(ctx.old) : undefined;
  defaults(spec, { type: "ClusterIP", sessionAffinity: "None" });
  const causes: FieldCause[] = [];
  const ports = Array.isArray(spec["ports"]) ? spec["ports"] : [];
  ports.forEach((p, i) => {
    if (!isObj(p)) return;
    if (typeof p["port"] !== "number" || p["port"] < 1 || p["port"] > 65535)
      causes.push({
        type: "FieldValueInvalid",
        field: `spec.ports[${i}].port`,
        message: `Invalid value: ${JSON.stringify(p["port"] ?? 0)}: must be between 1 and 65535, inclusive`,
      });
    defaults(p, { protocol: "TCP" });
    if (spec["type"] !== "ExternalName") defaults(p, { targetPort: p["port"] });
    if ((spec["type"] === "NodePort" || spec["type"] === "LoadBalancer") && p["nodePort"] === undefined) {
      const before = Array.isArray(old?.["ports"])
        ? old["ports"].filter(isObj).find((q) => q["port"] === p["port"])
        : undefined;
      p["nodePort"] = before?.["nodePort"] ?? randomInt(30000, 32768);
    }
  });
  if (ports.length > 1 && ports.some((p) => isObj(p) && p["name"] === undefined))
    causes.push({ type: "FieldValueRequired", field: "spec.ports[0].name", message: "Required value" });
  if (spec["type"] !== "ExternalName" && ports.length === 0 && spec["clusterIP"] !== "None")
    causes.push({ type: "FieldValueRequired", field: "spec.ports", message: "Required value" });
  if (causes.length > 0) throw invalid("Service", "", nameOf(o), causes);
  if (spec["type"] === "ExternalName") return;
  // clusterIP is allocated once and kept (an apply or PUT that omits it keeps the old one, as upstream)
  const ip = spec["clusterIP"] ?? old?.["clusterIP"] ?? `10.96.${randomInt(0, 256)}.${randomInt(1, 255)}`;
  if (old?.["clusterIP"] !== undefined && ip !== old["clusterIP"])
    throw invalid("Service", "", nameOf(o), [
      {
        type: "FieldValueInvalid",
        field: "spec.clusterIPs[0]",
        message: `Invalid value: ${JSON.stringify([ip])}: may not change once set`,
      },
    ]);
  spec["clusterIP"] = ip;
  spec["clusterIPs"] = [ip];
  if (ip !== "None") defaults(spec, { ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack" });
  defaults(spec, { internalTrafficPolicy: "Cluster" });
}

const ACCESS_MODES: Record<string, string> = {
  ReadWriteOnce: "RWO",
  ReadOnlyMany: "ROX",
  ReadWriteMany: "RWX",
  ReadWriteOncePod: "RWOP",
};

const PVC_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
    column("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
    column("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
    column("Access Modes", "string", "accessModes contains the desired access modes the volume should have."),
    column("StorageClass", "string", "storageClassName is the name of the StorageClass required by the claim."),
    column(
      "VolumeAttributesClass",
      "string",
      "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
    ),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const spec = specOf(o);
    const status = statusOf(o);
    const capacity = isObj(status["capacity"]) ? String(status["capacity"]["storage"] ?? "") : "";
    const modes = Array.isArray(status["accessModes"])
      ? (status["accessModes"] as string[]).map((m) => ACCESS_MODES[m] ?? m).join(",")
      : "";
    return [
      nameOf(o),
      status["phase"] ?? "",
      spec["volumeName"] ?? "",
      capacity,
      modes,
      spec["storageClassName"] ?? "<unset>",
      spec["volumeAttributesClassName"] ?? "<unset>",
      age(o, now),
    ];
  },
};

function preparePvc(o: Obj, ctx: PrepareContext): void {
  const spec = isObj(o["spec"]) ? o["spec"] : {};
  o["spec"] = spec;
  const causes: FieldCause[] = [];
  if (!Array.isArray(spec["accessModes"]) || spec["accessModes"].length === 0)
    causes.push({
      type: "FieldValueRequired",
      field: "spec.accessModes",
      message: "Required value: at least 1 access mode is required",
    });
  const requests =
    isObj(spec["resources"]) && isObj(spec["resources"]["requests"]) ? spec["resources"]["requests"] : {};
  if (requests["storage"] === undefined)
    causes.push({ type: "FieldValueRequired", field: "spec.resources[storage]", message: "Required value" });
  if (ctx.old) {
    // upstream: immutable after creation except resources.requests (expansion) and volumeAttributesClassName
    const strip = (s: Obj) => {
      const c = { ...s };
      delete c["resources"];
      delete c["volumeAttributesClassName"];
      delete c["volumeName"];
      return c;
    };
    if (!jsonEqual(strip(spec), strip(specOf(ctx.old))))
      causes.push({
        type: "FieldValueForbidden",
        field: "spec",
        message:
          "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
      });
  }
  if (causes.length > 0) throw invalid("PersistentVolumeClaim", "", nameOf(o), causes);
  defaults(spec, { volumeMode: "Filesystem" });
  if (!ctx.old) o["status"] = { phase: "Pending" };
}

const PDB_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column(
      "Min Available",
      "string",
      'The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. "28%".',
    ),
    column(
      "Max Unavailable",
      "string",
      'The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. "28%".',
    ),
    column("Allowed Disruptions", "integer", "Number of pod disruptions that are currently allowed."),
    AGE_COLUMN,
  ],
  cells: (o, now) => [
    nameOf(o),
    specOf(o)["minAvailable"] ?? "N/A",
    specOf(o)["maxUnavailable"] ?? "N/A",
    Number(statusOf(o)["disruptionsAllowed"] ?? 0),
    age(o, now),
  ],
};

function preparePdb(o: Obj): void {
  const spec = specOf(o);
  if (spec["minAvailable"] !== undefined && spec["maxUnavailable"] !== undefined) {
    throw invalid("PodDisruptionBudget", "policy", nameOf(o), [
      {
        type: "FieldValueInvalid",
        field: "spec",
        message: `Invalid value: ${JSON.stringify(spec)}: minAvailable and maxUnavailable cannot be both set`,
      },
    ]);
  }
}

const NETWORK_POLICY_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies."),
    AGE_COLUMN,
  ],
  cells: (o, now) => [nameOf(o), formatSelector(specOf(o)["podSelector"]), age(o, now)],
};

function prepareNetworkPolicy(o: Obj): void {
  const spec = specOf(o);
  if (!isObj(spec["podSelector"]))
    throw invalid("NetworkPolicy", "networking.k8s.io", nameOf(o), [
      { type: "FieldValueRequired", field: "spec.podSelector", message: "Required value" },
    ]);
  // SetDefaults_NetworkPolicySpec: Ingress always, Egress when egress rules are given
  if (spec["policyTypes"] === undefined)
    spec["policyTypes"] =
      Array.isArray(spec["egress"]) && spec["egress"].length > 0 ? ["Ingress", "Egress"] : ["Ingress"];
}

// Known fields of the specs and pod templates (k8s.io/api 1.32), so a typo in a manifest is pruned, or
// refused with fieldValidation=Strict (kubectl's default), instead of vanishing silently.
export const CONTAINER = [
  "name",
  "image",
  "command",
  "args",
  "workingDir",
  "ports",
  "envFrom",
  "env",
  "resources",
  "resizePolicy",
  "restartPolicy",
  "volumeMounts",
  "volumeDevices",
  "livenessProbe",
  "readinessProbe",
  "startupProbe",
  "lifecycle",
  "terminationMessagePath",
  "terminationMessagePolicy",
  "imagePullPolicy",
  "securityContext",
  "stdin",
  "stdinOnce",
  "tty",
];
export const POD_SPEC = [
  "volumes",
  "initContainers",
  "containers",
  "ephemeralContainers",
  "restartPolicy",
  "terminationGracePeriodSeconds",
  "activeDeadlineSeconds",
  "dnsPolicy",
  "nodeSelector",
  "serviceAccountName",
  "serviceAccount",
  "automountServiceAccountToken",
  "nodeName",
  "hostNetwork",
  "hostPID",
  "hostIPC",
  "shareProcessNamespace",
  "securityContext",
  "imagePullSecrets",
  "hostname",
  "subdomain",
  "affinity",
  "schedulerName",
  "tolerations",
  "hostAliases",
  "priorityClassName",
  "priority",
  "dnsConfig",
  "readinessGates",
  "runtimeClassName",
  "enableServiceLinks",
  "preemptionPolicy",
  "overhead",
  "topologySpreadConstraints",
  "setHostnameAsFQDN",
  "os",
  "hostUsers",
  "schedulingGates",
  "resourceClaims",
  "resources",
];

export function podTemplateFields(spec: string[]): Record<string, string[]> {
  return {
    spec,
    "spec.template": ["metadata", "spec"],
    "spec.template.spec": POD_SPEC,
    "spec.template.spec.containers[]": CONTAINER,
    "spec.template.spec.initContainers[]": CONTAINER,
  };
}

export const REPLICAS_SCALE = { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas" };

export function workloadResourceTypes(): ResourceType[] {
  const apps = "apps";
  return [
    base(apps, "v1", "Deployment", "deployments", true, {
      shortNames: ["deploy"],
      categories: ["all"],
      subresources: ["status", "scale"],
      scale: REPLICAS_SCALE,
      generation: true,
      knownFields: known("spec", "status"),
      table: DEPLOYMENT_TABLE,
      nestedKnownFields: podTemplateFields([
        "replicas",
        "selector",
        "template",
        "strategy",
        "minReadySeconds",
        "revisionHistoryLimit",
        "paused",
        "progressDeadlineSeconds",
      ]),
      listTypes: listTypes(podTemplateListTypes("spec.template.spec")),
      prepare: (o, ctx) => {
        checkPodController("Deployment", o, ctx);
        const spec = specOf(o);
        defaults(spec, { replicas: 1, revisionHistoryLimit: 10, progressDeadlineSeconds: 600 });
        defaults(spec, { strategy: {} });
        if (isObj(spec["strategy"])) defaults(spec["strategy"], { type: "RollingUpdate" });
        if (isObj(spec["strategy"]) && spec["strategy"]["type"] === "RollingUpdate") {
          defaults(spec["strategy"], { rollingUpdate: {} });
          if (isObj(spec["strategy"]["rollingUpdate"]))
            defaults(spec["strategy"]["rollingUpdate"], { maxUnavailable: "25%", maxSurge: "25%" });
        }
        checkStrategy(o);
      },
    }),
    base(apps, "v1", "StatefulSet", "statefulsets", true, {
      shortNames: ["sts"],
      categories: ["all"],
      subresources: ["status", "scale"],
      scale: REPLICAS_SCALE,
      generation: true,
      knownFields: known("spec", "status"),
      table: STATEFULSET_TABLE,
      nestedKnownFields: podTemplateFields([
        "replicas",
        "selector",
        "template",
        "volumeClaimTemplates",
        "serviceName",
        "podManagementPolicy",
        "updateStrategy",
        "revisionHistoryLimit",
        "minReadySeconds",
        "persistentVolumeClaimRetentionPolicy",
        "ordinals",
      ]),
      listTypes: listTypes({ ...podTemplateListTypes("spec.template.spec") }),
      prepare: (o, ctx) => {
        checkPodController("StatefulSet", o, ctx);
        const spec = specOf(o);
        defaults(spec, {
          replicas: 1,
          revisionHistoryLimit: 10,
          podManagementPolicy: "OrderedReady",
          updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 0 } },
          persistentVolumeClaimRetentionPolicy: { whenDeleted: "Retain", whenScaled: "Retain" },
        });
      },
    }),
    base("", "v1", "Service", "services", true, {
      shortNames: ["svc"],
      categories: ["all"],
      subresources: ["status"],
      knownFields: known("spec", "status"),
      table: SERVICE_TABLE,
      nestedKnownFields: {
        spec: [
          "ports",
          "selector",
          "clusterIP",
          "clusterIPs",
          "type",
          "externalIPs",
          "sessionAffinity",
          "loadBalancerIP",
          "loadBalancerSourceRanges",
          "externalName",
          "externalTrafficPolicy",
          "healthCheckNodePort",
          "publishNotReadyAddresses",
          "sessionAffinityConfig",
          "ipFamilies",
          "ipFamilyPolicy",
          "allocateLoadBalancerNodePorts",
          "loadBalancerClass",
          "internalTrafficPolicy",
          "trafficDistribution",
        ],
        "spec.ports[]": ["name", "protocol", "appProtocol", "port", "targetPort", "nodePort"],
      },
      listTypes: listTypes({ "spec.ports": { type: "map", keys: ["port"] } }),
      prepare: prepareService,
    }),
    base("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, {
      shortNames: ["pvc"],
      subresources: ["status"],
      knownFields: known("spec", "status"),
      table: PVC_TABLE,
      prepare: preparePvc,
      nestedKnownFields: {
        spec: [
          "accessModes",
          "selector",
          "resources",
          "volumeName",
          "storageClassName",
          "volumeMode",
          "dataSource",
          "dataSourceRef",
          "volumeAttributesClassName",
        ],
      },
    }),
    base("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, {
      shortNames: ["pdb"],
      subresources: ["status"],
      generation: true,
      knownFields: known("spec", "status"),
      table: PDB_TABLE,
      prepare: preparePdb,
      nestedKnownFields: { spec: ["minAvailable", "selector", "maxUnavailable", "unhealthyPodEvictionPolicy"] },
    }),
    base("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true, {
      shortNames: ["netpol"],
      generation: true,
      knownFields: known("spec"),
      table: NETWORK_POLICY_TABLE,
      prepare: prepareNetworkPolicy,
      nestedKnownFields: { spec: ["podSelector", "ingress", "egress", "policyTypes"] },
    }),
  ];
}
