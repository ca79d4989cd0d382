import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { kubeletNodeStatus, nodeArch } from "@mds/devkube";
import { createKubeClient, kubeFetch } from "../../src/kube/client.ts";
import { KubeError, kubeErrorFor } from "../../src/kube/errors.ts";
import { createInformer, type Informer } from "../../src/kube/informer.ts";
import type { KubeConfig } from "../../src/kube/kubeconfig.ts";
import { LeaseType, pathOf, type KubeObject, type ResourceType } from "../../src/kube/types.ts";
import { PodType } from "../../src/operator/secret/consumers.ts";

// A kubelet for tests, in the manner of kwok, that works the same against devkube started with
// `pods: { kubelet: false }` and against a real API server where kube-controller-manager rolls the workloads but no
// kubelet may run their pods (no nodes, or pods we must not really run). It registers a fake Node of its own,
// tainted so that no other pod of the cluster lands there, and keeps it healthy with a node Lease; it binds the pods
// of the test's namespaces that name its scheduler (`placement`: the default scheduler leaves such pods alone)
// through the `binding` subresource, then reports them Running and Ready through the `status` subresource after a
// delay, as a kubelet does once the containers run. A pod that carries `devkube.mds.dev/ready: "false"` stays Running
// but never Ready (a stuck rollout), as under devkube's own kubelet. A pod being deleted is finished with a delete of
// grace period 0, which is how a kubelet tells the API server its containers are gone (without it a real API server
// keeps the pod Terminating and a StatefulSet never replaces it). Pods come from watches (informers), never a poll.

/** The scheduler name a pod template sets to be bound and run by a harness kubelet (`placement`). */
export const HARNESS_SCHEDULER = "mds-harness-kubelet";
/** Label of the harness kubelet's Node (value: its name) and key of its NoSchedule taint. */
export const HARNESS_NODE_LABEL = "mds.dev/harness-node";
/** The annotation devkube's own kubelet reads: "false" keeps the pod Running but never Ready. */
export const NOT_READY_ANNOTATION = "devkube.mds.dev/ready";

const NodeType: ResourceType = { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false };
const FIELD_MANAGER = "mds-harness-kubelet";
/** As a kubelet's node lease: 40 s, renewed every quarter of it. */
const LEASE_SECONDS = 40;

export interface Placement {
  schedulerName: string;
  nodeSelector: Record<string, string>;
  tolerations: { key: string; operator: "Exists"; effect: "NoSchedule" }[];
}

export interface HarnessKubelet {
  /** The name of its Node. */
  node: string;
  /**
   * What a pod template's spec needs to be run by this kubelet: its scheduler (so no other scheduler binds the pods),
   * a nodeSelector and a toleration of its Node (so a DaemonSet targets that Node alone).
   */
  placement: Placement;
  /** A copy of a pod template (`{ metadata, spec }`) with `placement` merged into its spec. */
  place<T extends { spec?: object }>(template: T): T;
  /** Ends a running pod's containers: phase Succeeded (exit 0) or Failed (exit 1), as a kubelet reports them. */
  finish(namespace: string, name: string, phase?: "Succeeded" | "Failed"): Promise<void>;
  /** The pods ("namespace/name") whose deletion it finished, each once the API server accepted its final delete. */
  finalized: string[];
  /** Unexpected API errors of its writes (conflicts, and pods gone meanwhile, are not errors: a watch event follows). */
  errors: string[];
  /** Stops its watches and timers, waits for its writes, and removes its Node and node Lease. */
  stop(): Promise<void>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const objs = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);
const now = () => new Date().toISOString().replace(/\.\d+Z$/, "Z");
/** A MicroTime (a Lease's renewTime): exactly six fractional digits, as the API server parses it. */
const microNow = () => new Date().toISOString().replace(/Z$/, "000Z");
const specOf = (pod: KubeObject) => (isObj(pod["spec"]) ? pod["spec"] : {});
const statusOf = (pod: KubeObject) => (isObj(pod["status"]) ? pod["status"] : {});

/** The node a DaemonSet's pod must go to: its required node affinity on metadata.name (upstream's DaemonSet controller). */
function affinityNode(pod: KubeObject): string | undefined {
  const affinity = specOf(pod)["affinity"];
  const nodeAffinity = isObj(affinity) ? affinity["nodeAffinity"] : undefined;
  const required = isObj(nodeAffinity) ? nodeAffinity["requiredDuringSchedulingIgnoredDuringExecution"] : undefined;
  for (const term of objs(isObj(required) ? required["nodeSelectorTerms"] : undefined))
    for (const field of objs(term["matchFields"]))
      if (field["key"] === "metadata.name" && field["operator"] === "In" && Array.isArray(field["values"]))
        return String(field["values"][0]);
  return undefined;
}

/** Sets a condition, keeping lastTransitionTime while its status stays (as every kubelet and controller does). */
function withCondition(conditions: Obj[], next: Obj): Obj[] {
  const current = conditions.find((c) => c["type"] === next["type"]);
  const merged: Obj = { lastProbeTime: null, ...next, lastTransitionTime: now() };
  if (current !== undefined && current["status"] === next["status"])
    merged["lastTransitionTime"] = current["lastTransitionTime"];
  return current === undefined ? [...conditions, merged] : conditions.map((c) => (c === current ? merged : c));
}

export async function startHarnessKubelet(args: {
  kubeConfig: KubeConfig;
  /** The namespaces whose pods it binds and runs. */
  namespaces: string[];
  /** From binding to Running and Ready (default 200 ms, as devkube's kubelet). */
  readyDelayMs?: number;
  /** From a pod's deletion to its containers gone (default 100 ms). */
  stopDelayMs?: number;
}): Promise<HarnessKubelet> {
  const readyDelayMs = args.readyDelayMs ?? 200;
  const stopDelayMs = args.stopDelayMs ?? 100;
  const kube = createKubeClient(args.kubeConfig, { fieldManager: FIELD_MANAGER });
  const node = `mds-harness-${randomBytes(4).toString("hex")}`;
  const errors: string[] = [];
  const finalized: string[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const boundAt = new Map<string, number>(); // pod uid → when this kubelet first saw it on its Node
  const finishing = new Set<string>(); // uids of deleted pods whose final delete is under way
  const running = new Map<string, Promise<void>>(); // pod key → its sync, one at a time per pod
  const queued = new Set<string>();
  const deletes = new Set<Promise<void>>(); // final deletes in flight, awaited by stop()
  let nextIp = 0;
  let closed = false;

  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (!closed) fn();
    }, ms);
    timers.add(t);
  };
  const note = (what: string, err: unknown) => {
    const status = err instanceof KubeError ? err.status : undefined;
    // 409: someone wrote first (the pod's next watch event brings it back); 404: the pod is gone.
    if (status !== 409 && status !== 404 && !closed) errors.push(`${what}: ${(err as Error).message}`);
  };
  async function send(what: string, method: "POST" | "DELETE", path: string, body: object): Promise<void> {
    const response = await kubeFetch(args.kubeConfig, what, method, path, {}, { body: JSON.stringify(body) });
    const text = await response.text();
    if (response.status >= 400) throw kubeErrorFor(what, response.status, text === "" ? undefined : JSON.parse(text));
  }

  // The Node, Ready, and its Lease: kube-controller-manager's node lifecycle controller marks a Node whose Lease
  // stops being renewed NotReady (and its pods not Ready), then evicts them; its pod GC deletes pods bound to a Node
  // that does not exist. The status is written through /status: what a create carries there is not kept everywhere.
  const created = await kube.create<KubeObject>(NodeType, {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: node,
      labels: {
        "kubernetes.io/hostname": node,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": nodeArch,
        [HARNESS_NODE_LABEL]: node,
      },
    },
    spec: { taints: [{ key: HARNESS_NODE_LABEL, value: node, effect: "NoSchedule" }] },
  });
  await kube.patchStatus(NodeType, undefined, node, {
    status: kubeletNodeStatus(node, { runtime: "mds-harness://1", osImage: "mds harness kubelet", now: now() }),
  });
  await kube.create<KubeObject>(LeaseType, {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: node,
      namespace: "kube-node-lease",
      ownerReferences: [{ apiVersion: "v1", kind: "Node", name: node, uid: created.metadata.uid! }],
    },
    spec: { holderIdentity: node, leaseDurationSeconds: LEASE_SECONDS, renewTime: microNow() },
  } as KubeObject);
  // A heartbeat is a timer by nature: nothing else tells a kubelet to renew.
  const renew = setInterval(
    () => {
      kube
        .patch(LeaseType, "kube-node-lease", node, { spec: { renewTime: microNow() } })
        .catch((err: unknown) => note(`renew the Lease of ${node}`, err));
    },
    (LEASE_SECONDS * 1000) / 4,
  );
  renew.unref();

  const informers = new Map<string, Informer<KubeObject>>();
  const key = (ns: string, name: string) => `${ns}/${name}`;
  function enqueue(ns: string, name: string): void {
    const k = key(ns, name);
    if (closed || queued.has(k)) return;
    queued.add(k);
    const next = (running.get(k) ?? Promise.resolve()).then(async () => {
      queued.delete(k);
      const pod = informers.get(ns)?.get(ns, name);
      if (pod !== undefined && !closed) await sync(pod).catch((err: unknown) => note(`sync pod ${k}`, err));
    });
    running.set(k, next);
    void next.finally(() => {
      if (running.get(k) === next) running.delete(k);
    });
  }

  async function sync(pod: KubeObject): Promise<void> {
    const { namespace, name, uid } = pod.metadata;
    const ns = namespace!;
    const spec = specOf(pod);
    const nodeName = spec["nodeName"];
    if (pod.metadata.deletionTimestamp !== undefined) {
      // The containers get their SIGTERM; once they are gone the kubelet removes the pod (grace period 0, this uid).
      if (nodeName !== node || finishing.has(uid!)) return;
      finishing.add(uid!);
      later(stopDelayMs, () => {
        const done = send(`finish the deletion of pod ${ns}/${name}`, "DELETE", pathOf(PodType, ns, name), {
          kind: "DeleteOptions",
          apiVersion: "v1",
          gracePeriodSeconds: 0,
          preconditions: { uid },
        })
          .then(() => void finalized.push(`${ns}/${name}`))
          .catch((err: unknown) => note(`finish the deletion of pod ${ns}/${name}`, err))
          .finally(() => deletes.delete(done));
        deletes.add(done);
      });
      return;
    }
    if (nodeName === undefined || nodeName === "") {
      if (spec["schedulerName"] !== HARNESS_SCHEDULER) return;
      const target = affinityNode(pod) ?? node;
      if (target !== node) return; // a DaemonSet's pod for another Node: not ours to run
      await send(`bind pod ${ns}/${name}`, "POST", pathOf(PodType, ns, name, "binding"), {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name, namespace: ns, uid },
        target: { apiVersion: "v1", kind: "Node", name: node },
      }).catch((err: unknown) => note(`bind pod ${ns}/${name}`, err));
      return;
    }
    if (nodeName !== node) return;
    const status = statusOf(pod);
    if (status["phase"] === "Succeeded" || status["phase"] === "Failed") return;
    const bound = boundAt.get(uid!) ?? Date.now();
    boundAt.set(uid!, bound);
    const wait = bound + readyDelayMs - Date.now();
    if (status["phase"] !== "Running" && wait > 0) {
      later(wait, () => enqueue(ns, name));
      return;
    }
    const ready = pod.metadata.annotations?.[NOT_READY_ANNOTATION] !== "false";
    const current = objs(status["conditions"]).find((c) => c["type"] === "Ready")?.["status"];
    if (status["phase"] === "Running" && current === (ready ? "True" : "False")) return;
    await kube
      .patchStatus(PodType, ns, name, {
        metadata: { uid, resourceVersion: pod.metadata.resourceVersion },
        status: runningStatus(pod, ready),
      })
      .catch((err: unknown) => note(`report pod ${ns}/${name} running`, err));
  }

  /** What a kubelet reports once the containers run: Running, Ready unless the annotation says "false". */
  function runningStatus(pod: KubeObject, ready: boolean): Obj {
    const status = statusOf(pod);
    const flag = ready ? "True" : "False";
    const containers = objs(specOf(pod)["containers"]);
    const previous = new Map(objs(status["containerStatuses"]).map((c) => [String(c["name"]), c]));
    const unready = {
      reason: "ContainersNotReady",
      message: `containers with unready status: [${containers.map((c) => String(c["name"])).join(" ")}]`,
    };
    let conditions = objs(status["conditions"]);
    for (const type of ["PodReadyToStartContainers", "Initialized", "PodScheduled"])
      conditions = withCondition(conditions, { type, status: "True" });
    for (const type of ["ContainersReady", "Ready"])
      conditions = withCondition(conditions, { type, status: flag, ...(ready ? {} : unready) });
    const ip = typeof status["podIP"] === "string" ? status["podIP"] : allocateIp();
    return {
      phase: "Running",
      conditions,
      hostIP: "127.0.0.1",
      hostIPs: [{ ip: "127.0.0.1" }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: typeof status["startTime"] === "string" ? status["startTime"] : now(),
      containerStatuses: containers.map((c) => {
        const before = previous.get(String(c["name"]));
        return {
          name: c["name"],
          state: before?.["state"] ?? { running: { startedAt: now() } },
          lastState: {},
          ready,
          restartCount: 0,
          image: c["image"] ?? "",
          imageID: "",
          containerID: before?.["containerID"] ?? `mds-harness://${pod.metadata.uid}/${String(c["name"])}`,
          started: true,
        };
      }),
    };
  }

  function allocateIp(): string {
    const n = nextIp++;
    return `10.245.${Math.floor(n / 250) % 250}.${(n % 250) + 2}`;
  }

  for (const ns of args.namespaces) {
    const informer = createInformer<KubeObject>({
      kubeConfig: args.kubeConfig,
      client: kube,
      type: PodType,
      namespace: ns,
      onEvent: (event, pod) => {
        if (event === "delete") {
          boundAt.delete(pod.metadata.uid!);
          finishing.delete(pod.metadata.uid!);
          return;
        }
        enqueue(ns, pod.metadata.name);
      },
      logger: pino({ level: "silent" }),
    });
    informers.set(ns, informer);
  }
  await Promise.all([...informers.values()].map((i) => i.start()));

  const placement: Placement = {
    schedulerName: HARNESS_SCHEDULER,
    nodeSelector: { [HARNESS_NODE_LABEL]: node },
    tolerations: [{ key: HARNESS_NODE_LABEL, operator: "Exists", effect: "NoSchedule" }],
  };
  return {
    node,
    placement,
    errors,
    finalized,
    place<T extends { spec?: object }>(template: T): T {
      const copy = structuredClone(template);
      const spec = (copy.spec ?? {}) as Obj;
      copy.spec = {
        ...spec,
        schedulerName: placement.schedulerName,
        nodeSelector: { ...(isObj(spec["nodeSelector"]) ? spec["nodeSelector"] : {}), ...placement.nodeSelector },
        tolerations: [...objs(spec["tolerations"]), ...placement.tolerations],
      };
      return copy;
    },
    async finish(namespace, name, phase = "Succeeded") {
      const pod = await kube.get<KubeObject>(PodType, namespace, name);
      if (pod === undefined) throw new Error(`finish: no pod ${namespace}/${name}`);
      const status = statusOf(pod);
      const ok = phase === "Succeeded";
      const reason = ok ? "PodCompleted" : "PodFailed";
      let conditions = objs(status["conditions"]);
      for (const type of ["ContainersReady", "Ready"])
        conditions = withCondition(conditions, { type, status: "False", reason });
      const finishedAt = now();
      await kube.patchStatus(PodType, namespace, name, {
        metadata: { uid: pod.metadata.uid, resourceVersion: pod.metadata.resourceVersion },
        status: {
          phase,
          conditions,
          containerStatuses: objs(status["containerStatuses"]).map((c) => {
            const state = isObj(c["state"]) ? c["state"] : {};
            const startedAt = isObj(state["running"]) ? state["running"]["startedAt"] : finishedAt;
            return {
              ...c,
              ready: false,
              started: false,
              state: {
                terminated: {
                  exitCode: ok ? 0 : 1,
                  reason: ok ? "Completed" : "Error",
                  startedAt,
                  finishedAt,
                  containerID: c["containerID"],
                },
              },
            };
          }),
        },
      });
    },
    async stop() {
      closed = true;
      clearInterval(renew);
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await Promise.all([...informers.values()].map((i) => i.stop()));
      await Promise.all([...running.values(), ...deletes]);
      await kube.delete(LeaseType, "kube-node-lease", node).catch(() => undefined);
      await kube.delete(NodeType, undefined, node).catch(() => undefined);
    },
  };
}
