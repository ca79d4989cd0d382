import { metaOf, type Obj } from "./types.ts";
import {
  isTerminating,
  NODES,
  nowTime,
  objList,
  specOf,
  STORAGE,
  statusOf,
  uidOf,
  type WorkloadContext,
} from "./workload-context.ts";

// A pod lifecycle in the manner of kwok: devkube's fake Nodes, a scheduler that binds every pod to one of them, and a
// kubelet that runs nothing but reports each bound pod Running and Ready after a delay. The kubelet can be switched
// off (`kubelet: false`): then a test harness plays it, writing pod status through the status subresource as it does
// on a real cluster, and devkube only schedules.

/** Pod annotation (usually set in a pod template): "false" keeps the pod Running but never Ready. */
export const READY_ANNOTATION = "devkube.mds.dev/ready";

export interface PodLifecycleOptions {
  /** Run devkube's kubelet (default true). */
  kubelet: boolean;
  /** From scheduling to Running and Ready (default 200 ms). */
  readyDelayMs: number;
  /** Names of devkube's Nodes (default one, "devkube-node"). */
  nodes: string[];
}

const SCHEDULER = "kube-scheduler";
const KUBELET = "kubelet";

export class PodLifecycle {
  private readonly ctx: WorkloadContext;
  private readonly opts: PodLifecycleOptions;
  /** When this devkube first saw each pod bound (uid → ms); after a restart, the restart's time. */
  private readonly boundAt = new Map<string, number>();
  private nextNode = 0;
  private nextIp = 0;

  constructor(ctx: WorkloadContext, opts: PodLifecycleOptions) {
    this.ctx = ctx;
    this.opts = opts;
  }

  /** The Nodes, created once (a restart finds them). */
  ensureNodes(): void {
    for (const name of this.opts.nodes) {
      if (this.ctx.store.get(NODES, "", name)) continue;
      const node = this.ctx.create(
        NODES,
        "",
        {
          metadata: {
            name,
            labels: {
              "kubernetes.io/hostname": name,
              "kubernetes.io/os": "linux",
              "kubernetes.io/arch": nodeArch,
              type: "devkube",
            },
          },
          spec: {},
        },
        KUBELET,
      );
      node["status"] = kubeletNodeStatus(name, { runtime: "devkube://1", osImage: "devkube", now: nowTime() });
      this.ctx.update(NODES, node, KUBELET, "status");
    }
  }

  forget(uid: string): void {
    this.boundAt.delete(uid);
  }

  sync(ns: string, name: string): void {
    const pod = this.ctx.get(STORAGE.pod, ns, name);
    if (!pod || isTerminating(pod)) return;
    const spec = specOf(pod);
    if (!spec["nodeName"]) {
      if (spec["schedulerName"] === undefined || spec["schedulerName"] === "default-scheduler") this.bind(pod);
      return;
    }
    if (!this.opts.kubelet || !this.opts.nodes.includes(String(spec["nodeName"]))) return;
    const phase = statusOf(pod)["phase"];
    if (phase === "Succeeded" || phase === "Failed") return;
    const now = Date.now();
    const uid = uidOf(pod);
    const bound = this.boundAt.get(uid) ?? now;
    this.boundAt.set(uid, bound);
    const wait = bound + this.opts.readyDelayMs - now;
    if (phase !== "Running" && wait > 0) {
      this.ctx.requeue("pod", ns, name, wait);
      return;
    }
    this.report(pod, metaOf(pod)["annotations"]);
  }

  /** The scheduler's binding: the node with the fewest pods (ties: round robin), and PodScheduled. */
  private bind(pod: Obj): void {
    const counts = new Map(this.opts.nodes.map((n) => [n, 0]));
    for (const [, obj] of this.ctx.store.sorted(STORAGE.pod)) {
      const n = specOf(obj)["nodeName"];
      if (typeof n === "string" && counts.has(n)) counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    const min = Math.min(...counts.values());
    const candidates = this.opts.nodes.filter((n) => counts.get(n) === min);
    const node = candidates[this.nextNode++ % candidates.length] as string;
    specOf(pod)["nodeName"] = node;
    pod["spec"] = specOf(pod);
    const bound = this.ctx.update(STORAGE.pod, pod, SCHEDULER);
    const status = { ...statusOf(bound) };
    status["conditions"] = setCondition(objList(status["conditions"]), {
      type: "PodScheduled",
      status: "True",
      lastProbeTime: null,
      lastTransitionTime: nowTime(),
    });
    bound["status"] = status;
    this.ctx.update(STORAGE.pod, bound, SCHEDULER, "status");
    this.ctx.event(
      bound,
      "Scheduled",
      `Successfully assigned ${String(metaOf(bound)["namespace"])}/${String(metaOf(bound)["name"])} to ${node}`,
      "default-scheduler",
    );
  }

  /** What a kubelet reports once the containers run: Running, Ready unless the annotation says "false". */
  private report(pod: Obj, annotations: unknown): void {
    const ready = !(
      typeof annotations === "object" &&
      annotations !== null &&
      (annotations as Record<string, unknown>)[READY_ANNOTATION] === "false"
    );
    const status = { ...statusOf(pod) };
    const now = nowTime();
    const flag = ready ? "True" : "False";
    const startedAt = typeof status["startTime"] === "string" ? status["startTime"] : now;
    const containers = objList(specOf(pod)["containers"]);
    const previous = new Map(objList(status["containerStatuses"]).map((c) => [String(c["name"]), c]));
    let conditions = objList(status["conditions"]);
    for (const type of ["PodReadyToStartContainers", "Initialized"])
      conditions = setCondition(conditions, { type, status: "True", lastProbeTime: null, lastTransitionTime: now });
    for (const type of ["Ready", "ContainersReady"])
      conditions = setCondition(conditions, {
        type,
        status: flag,
        lastProbeTime: null,
        lastTransitionTime: now,
        ...(ready
          ? {}
          : {
              reason: "ContainersNotReady",
              message: `containers with unready status: [${containers.map((c) => String(c["name"])).join(" ")}]`,
            }),
      });
    conditions = setCondition(conditions, {
      type: "PodScheduled",
      status: "True",
      lastProbeTime: null,
      lastTransitionTime: now,
    });
    const ip = typeof status["podIP"] === "string" ? status["podIP"] : this.allocateIp();
    const next: Obj = {
      ...status,
      phase: "Running",
      conditions,
      hostIP: "127.0.0.1",
      hostIPs: [{ ip: "127.0.0.1" }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: startedAt,
      containerStatuses: containers.map((c) => {
        const name = String(c["name"]);
        const before = previous.get(name);
        const state = before?.["state"] ?? { running: { startedAt: now } };
        return {
          name,
          state,
          lastState: {},
          ready,
          restartCount: 0,
          image: c["image"] ?? "",
          imageID: "",
          containerID: before?.["containerID"] ?? `devkube://${uidOf(pod)}/${name}`,
          started: true,
        };
      }),
    };
    if (JSON.stringify(orderless(next)) === JSON.stringify(orderless(statusOf(pod)))) return;
    const starting = statusOf(pod)["phase"] !== "Running";
    pod["status"] = next;
    this.ctx.update(STORAGE.pod, pod, KUBELET, "status");
    if (starting)
      for (const c of containers) this.ctx.event(pod, "Started", `Started container ${String(c["name"])}`, KUBELET);
  }

  private allocateIp(): string {
    const n = this.nextIp++;
    return `10.244.${Math.floor(n / 250) % 250}.${(n % 250) + 2}`;
  }
}

/** Sets a condition, keeping lastTransitionTime when its status did not change (as every controller does). */
function setCondition(conditions: Obj[], next: Obj): Obj[] {
  const current = conditions.find((c) => c["type"] === next["type"]);
  if (current && current["status"] === next["status"] && current["reason"] === next["reason"]) return conditions;
  const merged = { ...next };
  if (current && current["status"] === next["status"]) merged["lastTransitionTime"] = current["lastTransitionTime"];
  return current ? conditions.map((c) => (c === current ? merged : c)) : [...conditions, merged];
}

/** JSON with object keys sorted, to compare a status with the one stored. */
function orderless(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(orderless);
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, orderless((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** This machine's architecture as a Node's `kubernetes.io/arch` label and nodeInfo name it. */
export const nodeArch = process.arch === "arm64" ? "arm64" : "amd64";

/**
 * The status a kubelet posts for a Ready Node of this machine: capacity, the Ready condition, its addresses and
 * nodeInfo. devkube's own kubelet and the tests' harness kubelet (which plays one on any cluster) both write it.
 */
export function kubeletNodeStatus(name: string, who: { runtime: string; osImage: string; now: string }): Obj {
  return {
    capacity: { cpu: "32", memory: "256Gi", pods: "1000" },
    allocatable: { cpu: "32", memory: "256Gi", pods: "1000" },
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "kubelet is posting ready status",
        lastHeartbeatTime: who.now,
        lastTransitionTime: who.now,
      },
    ],
    addresses: [
      { type: "InternalIP", address: "127.0.0.1" },
      { type: "Hostname", address: name },
    ],
    nodeInfo: {
      kubeletVersion: "v1.32.0",
      kubeProxyVersion: "",
      containerRuntimeVersion: who.runtime,
      operatingSystem: "linux",
      architecture: nodeArch,
      osImage: who.osImage,
      kernelVersion: "",
      machineID: "",
      systemUUID: "",
      bootID: "",
    },
  };
}
