import { metaOf, type Obj } from "./types.ts";
import { nameOf, nowTime, num, objList, specOf, statusOf } from "./workload-context.ts";

// A Deployment's status as upstream's calculateStatus and syncRolloutStatus compute it from its ReplicaSets: the
// counts kubectl prints, Available against maxUnavailable, and Progressing with its reasons and messages, timing out
// (ProgressDeadlineExceeded) once nothing moved for progressDeadlineSeconds.

interface StatusInput {
  d: Obj;
  /** Its ReplicaSets, the new one included. */
  all: Obj[];
  newRs: Obj | undefined;
  paused: boolean;
  /** The new ReplicaSet was created by this sync. */
  created: boolean;
  maxUnavailable: number;
  now: number;
}

const sum = (list: Obj[], f: (o: Obj) => number): number => list.reduce((n, o) => n + f(o), 0);
const replicasOf = (rs: Obj): number => num(specOf(rs)["replicas"]);

/** The status to write, and when to look again (the progress deadline of a rollout that is not moving). */
export function deploymentStatus(input: StatusInput): { status: Obj; recheckInMs?: number } {
  const { d, all, newRs, paused, created, maxUnavailable: unavailable, now } = input;
  const before = statusOf(d);
  const spec = specOf(d);
  const desired = num(spec["replicas"], 1);
  let recheckInMs: number | undefined;
  const st = (rs: Obj, k: string) => num(statusOf(rs)[k]);
  const replicas = sum(all, (rs) => st(rs, "replicas"));
  const available = sum(all, (rs) => st(rs, "availableReplicas"));
  const status: Obj = {
    observedGeneration: metaOf(d)["generation"],
    replicas,
    updatedReplicas: newRs ? st(newRs, "replicas") : 0,
    readyReplicas: sum(all, (rs) => st(rs, "readyReplicas")),
    availableReplicas: available,
    // upstream counts the ReplicaSets' desired replicas here, surge included
    unavailableReplicas: Math.max(0, sum(all, replicasOf) - available),
  };
  // DeploymentStatus' counts are omitempty
  for (const k of Object.keys(status)) if (status[k] === 0) delete status[k];
  if (before["collisionCount"] !== undefined) status["collisionCount"] = before["collisionCount"];
  const time = nowTime(now);
  let conditions = objList(before["conditions"]).map((c) => ({ ...c }));
  const put = (c: Obj, keepUpdateTime = false) => {
    const cur = conditions.find((x) => x["type"] === c["type"]);
    if (cur && cur["status"] === c["status"] && cur["reason"] === c["reason"] && !keepUpdateTime) return;
    const next: Obj = { ...c, lastUpdateTime: time, lastTransitionTime: time };
    if (cur && cur["status"] === c["status"]) next["lastTransitionTime"] = cur["lastTransitionTime"];
    conditions = [...conditions.filter((x) => x !== cur), next];
  };
  put(
    available >= desired - unavailable
      ? {
          type: "Available",
          status: "True",
          reason: "MinimumReplicasAvailable",
          message: "Deployment has minimum availability.",
        }
      : {
          type: "Available",
          status: "False",
          reason: "MinimumReplicasUnavailable",
          message: "Deployment does not have minimum availability.",
        },
  );
  const rsName = newRs ? nameOf(newRs) : "";
  const progressing = conditions.find((c) => c["type"] === "Progressing");
  const deadline = spec["progressDeadlineSeconds"];
  if (paused) {
    if (progressing?.["reason"] !== "DeploymentPaused")
      put({ type: "Progressing", status: "Unknown", reason: "DeploymentPaused", message: "Deployment is paused" });
  } else if (progressing?.["reason"] === "DeploymentPaused") {
    put({ type: "Progressing", status: "Unknown", reason: "DeploymentResumed", message: "Deployment is resumed" });
  } else if (typeof deadline === "number") {
    const complete = num(status["updatedReplicas"]) === desired && replicas === desired && available === desired;
    const oldReplicas = (s: Obj) => num(s["replicas"]) - num(s["updatedReplicas"]);
    const moved =
      num(status["updatedReplicas"]) > num(before["updatedReplicas"]) ||
      oldReplicas(status) < oldReplicas(before) ||
      num(status["readyReplicas"]) > num(before["readyReplicas"]) ||
      available > num(before["availableReplicas"]);
    if (complete) {
      put({
        type: "Progressing",
        status: "True",
        reason: "NewReplicaSetAvailable",
        message: `ReplicaSet "${rsName}" has successfully progressed.`,
      });
    } else if (created) {
      put({
        type: "Progressing",
        status: "True",
        reason: "NewReplicaSetCreated",
        message: `Created new replica set "${rsName}"`,
      });
    } else if (!progressing && newRs) {
      put({
        type: "Progressing",
        status: "True",
        reason: "FoundNewReplicaSet",
        message: `Found new replica set "${rsName}"`,
      });
    } else if (moved) {
      put(
        {
          type: "Progressing",
          status: "True",
          reason: "ReplicaSetUpdated",
          message: `ReplicaSet "${rsName}" is progressing.`,
        },
        true,
      );
    } else if (progressing?.["status"] === "True" && progressing["reason"] !== "NewReplicaSetAvailable") {
      const since = Date.parse(String(progressing["lastUpdateTime"] ?? ""));
      if (since + deadline * 1000 < now)
        put({
          type: "Progressing",
          status: "False",
          reason: "ProgressDeadlineExceeded",
          message: `ReplicaSet "${rsName}" has timed out progressing.`,
        });
    }
    // a rollout that stops moving times out progressDeadlineSeconds after its last progress: look again then
    const after = conditions.find((c) => c["type"] === "Progressing");
    if (!complete && after?.["status"] === "True") {
      const since = Date.parse(String(after["lastUpdateTime"] ?? ""));
      recheckInMs = Math.max(0, since + deadline * 1000 - now) + 1000;
    }
  }
  // Available first, as kube-controller-manager lists them
  status["conditions"] = [
    ...conditions.filter((c) => c["type"] === "Available"),
    ...conditions.filter((c) => c["type"] !== "Available"),
  ];
  return { status, ...(recheckInMs === undefined ? {} : { recheckInMs }) };
}
