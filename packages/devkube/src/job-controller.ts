import { podFromTemplate } from "./replicaset-controller.ts";
import { jsonEqual, type Obj } from "./types.ts";
import {
  condition,
  isTerminating,
  nameOf,
  nowTime,
  num,
  specOf,
  STORAGE,
  statusOf,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// The Job controller, its simplest part: pods <job>-<5 chars> up to parallelism (and no more than the completions
// still missing), status counts, Complete once enough pods Succeeded. devkube's kubelet never ends a container, so a
// Job's pods run until a client reports them Succeeded or Failed (status subresource) or deletes them; backoff,
// failure policies, indexed completion and CronJob scheduling are not emulated (a Job a client creates with a
// CronJob owner reference, as `kubectl create job --from=cronjob/…` does, is run like any other).

const MANAGER = "kube-controller-manager";
const COMPONENT = "job-controller";

export function syncJob(ctx: WorkloadContext, ns: string, name: string): void {
  const job = ctx.get(STORAGE.job, ns, name);
  if (!job || isTerminating(job)) return;
  const spec = specOf(job);
  const status = statusOf(job);
  if (condition(job, "Complete")?.["status"] === "True" || condition(job, "Failed")?.["status"] === "True") return;
  const owned = () => ctx.owned(STORAGE.pod, ns, uidOf(job));
  const phase = (p: Obj) => statusOf(p)["phase"];
  let pods = owned();
  const succeeded = pods.filter((p) => phase(p) === "Succeeded").length;
  const failed = pods.filter((p) => phase(p) === "Failed").length;
  const active = () => owned().filter((p) => !isTerminating(p) && phase(p) !== "Succeeded" && phase(p) !== "Failed");
  const completions = num(spec["completions"], 1);
  const want = spec["suspend"] === true ? 0 : Math.min(num(spec["parallelism"], 1), completions - succeeded);
  const running = active();
  for (let i = running.length; i < want; i++) {
    const pod = ctx.create(STORAGE.pod, ns, podFromTemplate(job, "Job"), MANAGER);
    ctx.event(job, "SuccessfulCreate", `Created pod: ${nameOf(pod)}`, COMPONENT);
  }
  for (const p of running.slice(Math.max(0, want))) {
    ctx.delete(STORAGE.pod, ns, nameOf(p));
    ctx.event(job, "SuccessfulDelete", `Deleted pod: ${nameOf(p)}`, COMPONENT);
  }
  pods = active();
  const now = nowTime();
  const next: Obj = {
    ...status,
    startTime: status["startTime"] ?? (spec["suspend"] === true ? undefined : now),
    active: pods.length,
    ready: pods.filter((p) => condition(p, "Ready")?.["status"] === "True").length,
    succeeded,
    failed,
    terminating: 0,
    uncountedTerminatedPods: {},
  };
  for (const k of ["active", "succeeded", "failed"]) if (next[k] === 0) delete next[k];
  if (next["startTime"] === undefined) delete next["startTime"];
  if (succeeded >= completions) {
    next["completionTime"] = now;
    next["conditions"] = [
      {
        type: "SuccessCriteriaMet",
        status: "True",
        reason: "CompletionsReached",
        message: "Reached expected number of succeeded pods",
        lastProbeTime: now,
        lastTransitionTime: now,
      },
      {
        type: "Complete",
        status: "True",
        reason: "CompletionsReached",
        message: "Reached expected number of succeeded pods",
        lastProbeTime: now,
        lastTransitionTime: now,
      },
    ];
  }
  if (jsonEqual(next, status)) return;
  const cur = ctx.get(STORAGE.job, ns, name);
  if (!cur) return;
  cur["status"] = next;
  ctx.update(STORAGE.job, cur, MANAGER, "status");
  if (next["completionTime"] !== undefined) ctx.event(job, "Completed", "Job completed", COMPONENT);
}
