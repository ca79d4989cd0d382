import { base, known } from "./builtins.ts";
import { invalid, type FieldCause } from "./errors.ts";
import type { BuiltinTable, PrepareContext, ResourceType } from "./resource-type.ts";
import { AGE_COLUMN, age, column, humanDuration, NAME_COLUMN } from "./table.ts";
import { isObj, jsonEqual, metaOf, type Obj } from "./types.ts";
import {
  checkPodController,
  CONTAINER,
  defaults,
  intOrPercentCauses,
  listTypes,
  POD_SPEC,
  podTemplateFields,
  podTemplateListTypes,
  REPLICAS_SCALE,
} from "./workloads.ts";

// The kinds the workload controllers create or read (Pods, ReplicaSets, DaemonSets, Jobs, CronJobs, Nodes,
// ControllerRevisions), stored as the API server stores them: defaults, the checks a client can get wrong,
// printer columns. What runs them is in the *-controller.ts files and pod-lifecycle.ts.

const specOf = (o: Obj): Obj => (isObj(o["spec"]) ? o["spec"] : {});
const statusOf = (o: Obj): Obj => (isObj(o["status"]) ? o["status"] : {});
const nameOf = (o: Obj): string => String(metaOf(o)["name"] ?? "");
const num = (v: unknown): number => (typeof v === "number" ? v : 0);
const objList = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);

/** "ready/total" and the STATUS column of `kubectl get pods` (upstream printPod, its common cases). */
function podReadyCell(o: Obj): string {
  const containers = Array.isArray(specOf(o)["containers"]) ? (specOf(o)["containers"] as unknown[]).length : 0;
  const statuses = Array.isArray(statusOf(o)["containerStatuses"])
    ? (statusOf(o)["containerStatuses"] as unknown[]).filter(isObj)
    : [];
  return `${statuses.filter((c) => c["ready"] === true).length}/${containers}`;
}

function podStatusCell(o: Obj): string {
  if (metaOf(o)["deletionTimestamp"]) return "Terminating";
  const status = statusOf(o);
  const statuses = Array.isArray(status["containerStatuses"]) ? status["containerStatuses"].filter(isObj) : [];
  for (const c of statuses) {
    const state = isObj(c["state"]) ? c["state"] : {};
    if (isObj(state["waiting"]) && state["waiting"]["reason"]) return String(state["waiting"]["reason"]);
    if (isObj(state["terminated"]) && state["terminated"]["reason"]) return String(state["terminated"]["reason"]);
  }
  return String(status["reason"] ?? status["phase"] ?? "");
}

const POD_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "string", "The aggregate status of the containers in this pod."),
    column(
      "Restarts",
      "string",
      "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE_COLUMN,
  ],
  cells: (o, now) => [nameOf(o), podReadyCell(o), podStatusCell(o), "0", age(o, now)],
};

// fields a pod update may change (upstream ValidatePodUpdate); nodeName only from unset (the scheduler's binding)
const POD_UPDATE_FORBIDDEN =
  "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

function mutableStripped(spec: Obj, nodeNameOld: unknown): Obj {
  const c: Obj = structuredClone(spec);
  delete c["activeDeadlineSeconds"];
  delete c["tolerations"];
  if (nodeNameOld === undefined) delete c["nodeName"];
  for (const k of ["containers", "initContainers"])
    if (Array.isArray(c[k])) c[k] = (c[k] as unknown[]).map((x) => (isObj(x) ? { ...x, image: undefined } : x));
  return c;
}

function preparePod(o: Obj, ctx: PrepareContext): void {
  const spec = isObj(o["spec"]) ? o["spec"] : {};
  o["spec"] = spec;
  const causes: FieldCause[] = [];
  if (!Array.isArray(spec["containers"]) || spec["containers"].length === 0)
    causes.push({ type: "FieldValueRequired", field: "spec.containers", message: "Required value" });
  if (ctx.old) {
    const old = specOf(ctx.old);
    if (!jsonEqual(mutableStripped(spec, old["nodeName"]), mutableStripped(old, old["nodeName"])))
      causes.push({ type: "FieldValueForbidden", field: "spec", message: POD_UPDATE_FORBIDDEN });
  }
  if (causes.length > 0) throw invalid("Pod", "", nameOf(o), causes);
  // the defaults a kubelet relies on (SetDefaults_PodSpec, the ServiceAccount admission plugin)
  defaults(spec, {
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    schedulerName: "default-scheduler",
    serviceAccountName: "default",
    enableServiceLinks: true,
  });
  if (!ctx.old && o["status"] === undefined) o["status"] = { phase: "Pending", qosClass: "BestEffort" };
}

const POD_FIELDS = [
  "spec.nodeName",
  "spec.restartPolicy",
  "spec.schedulerName",
  "spec.serviceAccountName",
  "status.phase",
  "status.podIP",
  "status.nominatedNodeName",
];

const NODE_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Status", "string", "The status of the node"),
    column("Roles", "string", "The roles of the node"),
    AGE_COLUMN,
    column("Version", "string", "Kubelet Version reported by the node."),
  ],
  cells: (o, now) => {
    const conditions = objList(statusOf(o)["conditions"]);
    const ready = conditions.find((c) => c["type"] === "Ready")?.["status"] === "True";
    const nodeInfo = statusOf(o)["nodeInfo"];
    const info: Obj = isObj(nodeInfo) ? nodeInfo : {};
    return [nameOf(o), ready ? "Ready" : "NotReady", "<none>", age(o, now), info["kubeletVersion"] ?? ""];
  },
};

const REPLICASET_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Desired", "integer", "Number of desired pods."),
    column("Current", "integer", "Number of actual replicas."),
    column("Ready", "integer", "Number of ready replicas."),
    AGE_COLUMN,
  ],
  cells: (o, now) => [
    nameOf(o),
    num(specOf(o)["replicas"]),
    num(statusOf(o)["replicas"]),
    num(statusOf(o)["readyReplicas"]),
    age(o, now),
  ],
};

const DAEMONSET_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
    column("Current", "integer", "The number of nodes running at least one daemon pod."),
    column("Ready", "integer", "The number of nodes that should be running the daemon pod and have one ready."),
    column("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod."),
    column("Available", "integer", "The number of nodes that should be running the daemon pod and have one available."),
    column("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node."),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const s = statusOf(o);
    const template = isObj(specOf(o)["template"]) ? (specOf(o)["template"] as Obj) : {};
    const sel = isObj(specOf(template)["nodeSelector"]) ? (specOf(template)["nodeSelector"] as Obj) : {};
    const selText = Object.entries(sel)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(",");
    return [
      nameOf(o),
      num(s["desiredNumberScheduled"]),
      num(s["currentNumberScheduled"]),
      num(s["numberReady"]),
      num(s["updatedNumberScheduled"]),
      num(s["numberAvailable"]),
      selText || "<none>",
      age(o, now),
    ];
  },
};

function jobStatusCell(o: Obj): string {
  const conditions = objList(statusOf(o)["conditions"]);
  const has = (t: string) => conditions.some((c) => c["type"] === t && c["status"] === "True");
  if (has("Complete")) return "Complete";
  if (has("Failed")) return "Failed";
  if (metaOf(o)["deletionTimestamp"]) return "Terminating";
  if (specOf(o)["suspend"] === true) return "Suspended";
  return "Running";
}

const JOB_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Status", "string", "Status of the job."),
    column("Completions", "string", "The desired number of successfully finished pods the job should be run with."),
    column("Duration", "string", "Time required to complete the job."),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const s = statusOf(o);
    const start = typeof s["startTime"] === "string" ? Date.parse(s["startTime"]) : undefined;
    const end = typeof s["completionTime"] === "string" ? Date.parse(s["completionTime"]) : now.getTime();
    return [
      nameOf(o),
      jobStatusCell(o),
      `${num(s["succeeded"])}/${num(specOf(o)["completions"] ?? 1)}`,
      start === undefined ? "" : humanDuration(end - start),
      age(o, now),
    ];
  },
};

/** Job defaulting and the selector the API server generates (manualSelector unset): batch.kubernetes.io/controller-uid. */
function prepareJob(o: Obj, ctx: PrepareContext): void {
  const spec = isObj(o["spec"]) ? o["spec"] : {};
  o["spec"] = spec;
  const template = isObj(spec["template"]) ? spec["template"] : {};
  spec["template"] = template;
  const podSpec = isObj(template["spec"]) ? template["spec"] : {};
  const causes: FieldCause[] = [];
  if (!Array.isArray(podSpec["containers"]) || podSpec["containers"].length === 0)
    causes.push({ type: "FieldValueRequired", field: "spec.template.spec.containers", message: "Required value" });
  if (podSpec["restartPolicy"] !== "Never" && podSpec["restartPolicy"] !== "OnFailure")
    causes.push({
      type: "FieldValueRequired",
      field: "spec.template.spec.restartPolicy",
      message: 'Required value: valid values: "OnFailure", "Never"',
    });
  if (ctx.old && !jsonEqual(specOf(ctx.old)["selector"], spec["selector"] ?? specOf(ctx.old)["selector"]))
    causes.push({ type: "FieldValueInvalid", field: "spec.selector", message: "Invalid value: field is immutable" });
  if (causes.length > 0) throw invalid("Job", "batch", nameOf(o), causes);
  defaults(spec, {
    parallelism: 1,
    completions: 1,
    backoffLimit: 6,
    completionMode: "NonIndexed",
    suspend: false,
    podReplacementPolicy: "TerminatingOrFailed",
  });
  if (ctx.old) {
    spec["selector"] = specOf(ctx.old)["selector"];
    return;
  }
  if (spec["manualSelector"] === true) return;
  const uid = String(metaOf(o)["uid"]);
  const name = nameOf(o);
  const meta = isObj(template["metadata"]) ? template["metadata"] : {};
  template["metadata"] = meta;
  meta["labels"] = {
    ...(isObj(meta["labels"]) ? meta["labels"] : {}),
    "batch.kubernetes.io/controller-uid": uid,
    "batch.kubernetes.io/job-name": name,
    "controller-uid": uid,
    "job-name": name,
  };
  spec["selector"] = { matchLabels: { "batch.kubernetes.io/controller-uid": uid } };
}

const CRONJOB_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    column(
      "Timezone",
      "string",
      "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
    ),
    column("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
    column("Active", "integer", "A list of pointers to currently running jobs."),
    column("Last Schedule", "date", "Information when was the last time the job was successfully scheduled."),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const s = statusOf(o);
    const last =
      typeof s["lastScheduleTime"] === "string"
        ? humanDuration(now.getTime() - Date.parse(s["lastScheduleTime"]))
        : "<none>";
    return [
      nameOf(o),
      specOf(o)["schedule"] ?? "",
      specOf(o)["timeZone"] ?? "<none>",
      specOf(o)["suspend"] === true,
      Array.isArray(s["active"]) ? s["active"].length : 0,
      last,
      age(o, now),
    ];
  },
};

const CONTROLLER_REVISION_TABLE: BuiltinTable = {
  columns: [
    NAME_COLUMN,
    column("Controller", "string", "Controller of the object"),
    column("Revision", "integer", "Revision indicates the revision of the state represented by Data."),
    AGE_COLUMN,
  ],
  cells: (o, now) => {
    const refs = Array.isArray(metaOf(o)["ownerReferences"])
      ? (metaOf(o)["ownerReferences"] as unknown[]).filter(isObj)
      : [];
    const owner = refs.find((r) => r["controller"] === true);
    const controller = owner
      ? `${String(owner["kind"]).toLowerCase()}.${String(owner["apiVersion"]).split("/")[0]}/${String(owner["name"])}`
      : "<none>";
    return [nameOf(o), controller, num(o["revision"]), age(o, now)];
  },
};

export function podResourceTypes(): ResourceType[] {
  const podTemplate = listTypes(podTemplateListTypes("spec.template.spec"));
  return [
    base("", "v1", "Pod", "pods", true, {
      shortNames: ["po"],
      categories: ["all"],
      subresources: ["status", "binding"],
      knownFields: known("spec", "status"),
      nestedKnownFields: { spec: POD_SPEC, "spec.containers[]": CONTAINER, "spec.initContainers[]": CONTAINER },
      listTypes: listTypes(podTemplateListTypes("spec")),
      table: POD_TABLE,
      prepare: preparePod,
      fieldSelectorKeys: POD_FIELDS,
      fieldSelector: (o, f) => {
        if (!POD_FIELDS.includes(f)) return undefined;
        const [part, key] = f.split(".") as [string, string];
        const v = (part === "spec" ? specOf(o) : statusOf(o))[key];
        return v === undefined ? "" : String(v);
      },
    }),
    base("", "v1", "Node", "nodes", false, {
      shortNames: ["no"],
      subresources: ["status"],
      knownFields: known("spec", "status"),
      table: NODE_TABLE,
    }),
    base("apps", "v1", "ReplicaSet", "replicasets", true, {
      shortNames: ["rs"],
      categories: ["all"],
      subresources: ["status", "scale"],
      scale: REPLICAS_SCALE,
      generation: true,
      knownFields: known("spec", "status"),
      table: REPLICASET_TABLE,
      nestedKnownFields: podTemplateFields(["replicas", "minReadySeconds", "selector", "template"]),
      listTypes: podTemplate,
      prepare: (o, ctx) => {
        checkPodController("ReplicaSet", o, ctx);
        defaults(specOf(o), { replicas: 1 });
      },
    }),
    base("apps", "v1", "DaemonSet", "daemonsets", true, {
      shortNames: ["ds"],
      categories: ["all"],
      subresources: ["status"],
      generation: true,
      knownFields: known("spec", "status"),
      table: DAEMONSET_TABLE,
      nestedKnownFields: podTemplateFields([
        "selector",
        "template",
        "updateStrategy",
        "minReadySeconds",
        "revisionHistoryLimit",
      ]),
      listTypes: podTemplate,
      prepare: (o, ctx) => {
        checkPodController("DaemonSet", o, ctx);
        const spec = specOf(o);
        defaults(spec, { revisionHistoryLimit: 10 });
        defaults(spec, { updateStrategy: { type: "RollingUpdate" } });
        if (isObj(spec["updateStrategy"]) && spec["updateStrategy"]["type"] === "RollingUpdate") {
          defaults(spec["updateStrategy"], { rollingUpdate: {} });
          const ru = spec["updateStrategy"]["rollingUpdate"];
          if (isObj(ru)) {
            defaults(ru, { maxUnavailable: 1, maxSurge: 0 });
            const field = "spec.updateStrategy.rollingUpdate";
            const causes = [
              ...intOrPercentCauses(ru["maxUnavailable"], `${field}.maxUnavailable`, true),
              ...intOrPercentCauses(ru["maxSurge"], `${field}.maxSurge`, true),
            ];
            const zero = (v: unknown) => v === 0 || v === "0%";
            if (causes.length === 0 && zero(ru["maxUnavailable"]) && zero(ru["maxSurge"]))
              causes.push({
                type: "FieldValueInvalid",
                field: `${field}.maxUnavailable`,
                message: `Invalid value: ${JSON.stringify(ru["maxUnavailable"])}: may not be 0 when \`maxSurge\` is 0`,
              });
            if (causes.length > 0) throw invalid("DaemonSet", "apps", nameOf(o), causes);
          }
        }
      },
    }),
    base("apps", "v1", "ControllerRevision", "controllerrevisions", true, {
      knownFields: known("data", "revision"),
      table: CONTROLLER_REVISION_TABLE,
    }),
    base("batch", "v1", "Job", "jobs", true, {
      categories: ["all"],
      subresources: ["status"],
      generation: true,
      knownFields: known("spec", "status"),
      table: JOB_TABLE,
      nestedKnownFields: podTemplateFields([
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "podFailurePolicy",
        "successPolicy",
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "selector",
        "manualSelector",
        "template",
        "ttlSecondsAfterFinished",
        "completionMode",
        "suspend",
        "podReplacementPolicy",
        "managedBy",
      ]),
      listTypes: podTemplate,
      prepare: prepareJob,
    }),
    base("batch", "v1", "CronJob", "cronjobs", true, {
      shortNames: ["cj"],
      categories: ["all"],
      subresources: ["status"],
      generation: true,
      knownFields: known("spec", "status"),
      table: CRONJOB_TABLE,
      nestedKnownFields: {
        spec: [
          "schedule",
          "timeZone",
          "startingDeadlineSeconds",
          "concurrencyPolicy",
          "suspend",
          "jobTemplate",
          "successfulJobsHistoryLimit",
          "failedJobsHistoryLimit",
        ],
      },
      prepare: (o) => {
        const spec = specOf(o);
        if (typeof spec["schedule"] !== "string" || spec["schedule"] === "")
          throw invalid("CronJob", "batch", nameOf(o), [
            { type: "FieldValueRequired", field: "spec.schedule", message: "Required value" },
          ]);
        defaults(spec, {
          concurrencyPolicy: "Allow",
          suspend: false,
          successfulJobsHistoryLimit: 3,
          failedJobsHistoryLimit: 1,
        });
      },
    }),
  ];
}
