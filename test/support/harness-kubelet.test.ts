import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startDevkube, type Devkube } from "@mds/devkube";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKubeClient, type KubeClient } from "../../src/kube/client.ts";
import { parseKubeConfig } from "../../src/kube/kubeconfig.ts";
import { LeaseType, type KubeObject } from "../../src/kube/types.ts";
import { PodType } from "../../src/operator/secret/consumers.ts";
import { eventually } from "./eventually.ts";
import { HARNESS_NODE_LABEL, HARNESS_SCHEDULER, startHarnessKubelet, type HarnessKubelet } from "./harness-kubelet.ts";
import { runKubectl } from "./kubectl.ts";

// The harness kubelet on devkube with its own kubelet off (`pods: { kubelet: false }`), as on a real cluster: the
// calls it makes (Node and node Lease, pods/binding, pods/status) are the ones a real API server takes.

const NodeType = { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false };
type Pod = KubeObject & {
  spec: { nodeName?: string; schedulerName?: string };
  status: {
    phase?: string;
    podIP?: string;
    startTime?: string;
    conditions?: { type: string; status: string; reason?: string }[];
    containerStatuses?: { name: string; ready: boolean; state: Record<string, { exitCode?: number }> }[];
  };
};

let dir: string;
let devkube: Devkube;
let kube: KubeClient;
let kubelet: HarnessKubelet;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "harness-kubelet-"));
  devkube = await startDevkube({ dir: path.join(dir, "kube"), port: 0, pods: { kubelet: false } });
  const kubeConfig = parseKubeConfig(devkube.kubeconfig);
  kube = createKubeClient(kubeConfig);
  kubelet = await startHarnessKubelet({ kubeConfig, namespaces: ["default"], readyDelayMs: 100 });
}, 60_000);
afterAll(async () => {
  await kubelet?.stop();
  await devkube?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const kubectl = async (args: string[], input?: string) => {
  const r = await runKubectl(devkube.kubeconfigPath, args, {
    cacheDir: path.join(dir, "cache"),
    ...(input === undefined ? {} : { input }),
  });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
const pods = async (label: string) =>
  (JSON.parse(await kubectl(["get", "pods", "-l", label, "-o", "json"])) as { items: Pod[] }).items;
const template = (app: string, annotations: Record<string, string> = {}) =>
  kubelet.place({
    metadata: { labels: { app }, annotations },
    spec: { containers: [{ name: "app", image: "example/app:1" }] },
  });
const condition = (pod: Pod, type: string) => pod.status.conditions?.find((c) => c.type === type);

describe("the harness kubelet", () => {
  it("registers a tainted, Ready Node with a node Lease", async () => {
    const node = (await kube.get<KubeObject>(NodeType, undefined, kubelet.node)) as KubeObject & {
      spec: { taints: unknown[] };
      status: { conditions: { type: string; status: string }[] };
    };
    expect(node.metadata.labels?.[HARNESS_NODE_LABEL]).toBe(kubelet.node);
    expect(node.spec.taints).toEqual([{ key: HARNESS_NODE_LABEL, value: kubelet.node, effect: "NoSchedule" }]);
    expect(node.status.conditions.find((c) => c.type === "Ready")?.status).toBe("True");
    const lease = await kube.get<KubeObject>(LeaseType, "kube-node-lease", kubelet.node);
    expect(lease?.["spec"]).toMatchObject({ holderIdentity: kubelet.node, leaseDurationSeconds: 40 });
  });

  it("binds a Deployment's pods and reports them Running and Ready: kubectl rollout status completes", async () => {
    await kubectl(
      ["apply", "-f", "-"],
      stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "web" },
        spec: { replicas: 2, selector: { matchLabels: { app: "web" } }, template: template("web") },
      }),
    );
    await kubectl(["rollout", "status", "deployment/web", "--timeout=60s"]);
    const running = await pods("app=web");
    expect(running).toHaveLength(2);
    for (const pod of running) {
      expect(pod.spec).toMatchObject({ nodeName: kubelet.node, schedulerName: HARNESS_SCHEDULER });
      expect(pod.status.phase).toBe("Running");
      for (const type of ["PodScheduled", "Initialized", "ContainersReady", "Ready"])
        expect(condition(pod, type)?.status).toBe("True");
      expect(pod.status.podIP).toMatch(/^10\.245\./);
      expect(pod.status.startTime).toBeTruthy();
      expect(pod.status.containerStatuses?.[0]).toMatchObject({ name: "app", ready: true });
      expect(pod.status.containerStatuses?.[0]?.state["running"]).toBeDefined();
    }
    // A rollout replaces them: the new pods are run too.
    await kubectl(["rollout", "restart", "deployment/web"]);
    await kubectl(["rollout", "status", "deployment/web", "--timeout=60s"]);
    expect((await pods("app=web")).filter((p) => !running.some((r) => r.metadata.uid === p.metadata.uid))).toHaveLength(
      2,
    );
    await kubectl(["delete", "deployment", "web"]);
  });

  it('keeps a pod annotated devkube.mds.dev/ready: "false" Running but not Ready, and makes it Ready once it is removed', async () => {
    await kubectl(
      ["apply", "-f", "-"],
      stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "stuck", labels: { app: "stuck" }, annotations: { "devkube.mds.dev/ready": "false" } },
        spec: template("stuck").spec,
      }),
    );
    await eventually(
      async () => {
        const [pod] = await pods("app=stuck");
        if (pod?.status.phase !== "Running") throw new Error(`phase ${pod?.status.phase}`);
        expect(condition(pod, "Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady" });
      },
      { what: "the pod Running, not Ready" },
    );
    await kubectl(["annotate", "pod", "stuck", "devkube.mds.dev/ready-"]);
    await eventually(
      async () => {
        const [pod] = await pods("app=stuck");
        if (condition(pod!, "Ready")?.status !== "True") throw new Error("not Ready yet");
      },
      { what: "the pod Ready" },
    );
    await kubectl(["delete", "pod", "stuck"]);
  });

  it("ends a Job's pod with finish(): Succeeded, its container terminated with exit code 0, the Job Complete", async () => {
    await kubectl(
      ["apply", "-f", "-"],
      stringify({
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: { name: "report" },
        spec: { template: { ...template("report"), spec: { ...template("report").spec, restartPolicy: "Never" } } },
      }),
    );
    const pod = await eventually(
      async () => {
        const [p] = await pods("job-name=report");
        if (p?.status.phase !== "Running") throw new Error("not running yet");
        return p;
      },
      { what: "the Job's pod Running" },
    );
    await kubelet.finish("default", pod.metadata.name);
    const done = (await kube.get<Pod>(PodType, "default", pod.metadata.name))!;
    expect(done.status.phase).toBe("Succeeded");
    expect(done.status.containerStatuses?.[0]?.state["terminated"]?.exitCode).toBe(0);
    expect(condition(done, "Ready")).toMatchObject({ status: "False", reason: "PodCompleted" });
    await kubectl(["wait", "--for=condition=Complete", "job/report", "--timeout=60s"]);
  });

  it("runs a DaemonSet's pod on its own Node only, and leaves the default scheduler's pods alone", async () => {
    await kubectl(
      ["apply", "-f", "-"],
      [
        stringify({
          apiVersion: "apps/v1",
          kind: "DaemonSet",
          metadata: { name: "agent" },
          spec: { selector: { matchLabels: { app: "agent" } }, template: template("agent") },
        }),
        stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "elsewhere", labels: { app: "elsewhere" } },
          spec: { containers: [{ name: "app", image: "example/app:1" }] },
        }),
      ].join("---\n"),
    );
    await kubectl(["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    const agents = await pods("app=agent");
    expect(agents.map((p) => p.spec.nodeName)).toEqual([kubelet.node]);
    // devkube's scheduler binds it to its own Node, where no kubelet runs it
    const [other] = await pods("app=elsewhere");
    expect(other?.spec.nodeName).not.toBe(kubelet.node);
    expect(other?.status.phase).toBe("Pending");
    await kubectl(["delete", "daemonset/agent", "pod/elsewhere"]);
    expect(kubelet.errors).toEqual([]);
  });

  it("finishes a pod's deletion with a delete of grace period 0 for its uid, as a kubelet once the containers are gone", async () => {
    // devkube deletes a pod at once where a real API server keeps it Terminating for its grace period; a finalizer
    // keeps it here, so that the harness's final delete runs against an API server and must be accepted.
    await kubectl(
      ["apply", "-f", "-"],
      stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "leaving", labels: { app: "leaving" }, finalizers: ["example.com/hold"] },
        spec: template("leaving").spec,
      }),
    );
    await eventually(async () => (await pods("app=leaving"))[0]?.status.phase === "Running", {
      what: "the pod Running",
    });
    await kubectl(["delete", "pod", "leaving", "--wait=false"]);
    await eventually(() => kubelet.finalized.includes("default/leaving"), { what: "the harness's final delete" });
    expect(kubelet.errors).toEqual([]);
    await kubectl(["patch", "pod", "leaving", "--type=merge", "-p", '{"metadata":{"finalizers":null}}']);
    await eventually(async () => (await pods("app=leaving")).length === 0, { what: "the pod gone" });
  });

  it("stops cleanly: its Node and Lease are gone", async () => {
    const other = await startHarnessKubelet({
      kubeConfig: parseKubeConfig(devkube.kubeconfig),
      namespaces: ["default"],
    });
    expect(await kube.get(NodeType, undefined, other.node)).toBeDefined();
    await other.stop();
    expect(await kube.get(NodeType, undefined, other.node)).toBeUndefined();
    expect(await kube.get(LeaseType, "kube-node-lease", other.node)).toBeUndefined();
    expect(other.errors).toEqual([]);
  });
});

describe("the harness kubelet on a cluster whose own scheduler and kubelet run (kind, k3d)", () => {
  it("gets every placed pod, and the cluster's kubelet none: Running with the harness's container ids", async () => {
    const other = await mkdtemp(path.join(tmpdir(), "harness-kubelet-full-"));
    const cluster = await startDevkube({ dir: path.join(other, "kube"), port: 0, pods: { readyDelayMs: 10 } });
    const kubeConfig = parseKubeConfig(cluster.kubeconfig);
    const harness = await startHarnessKubelet({ kubeConfig, namespaces: ["default"] });
    try {
      const run = async (args: string[], input?: string) => {
        const r = await runKubectl(cluster.kubeconfigPath, args, {
          cacheDir: path.join(other, "cache"),
          ...(input === undefined ? {} : { input }),
        });
        if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
        return r.stdout;
      };
      await run(
        ["apply", "-f", "-"],
        stringify({
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "web" },
          spec: {
            replicas: 3,
            selector: { matchLabels: { app: "web" } },
            template: harness.place({
              metadata: { labels: { app: "web" } },
              spec: { containers: [{ name: "app", image: "example/app:1" }] },
            }),
          },
        }),
      );
      await run(["rollout", "status", "deployment/web", "--timeout=60s"]);
      const items = (JSON.parse(await run(["get", "pods", "-l", "app=web", "-o", "json"])) as { items: Pod[] }).items;
      expect(items).toHaveLength(3);
      for (const pod of items) {
        expect(pod.spec.nodeName).toBe(harness.node);
        expect(
          (pod.status.containerStatuses?.[0] as { containerID?: string } | undefined)?.containerID?.startsWith(
            "mds-harness://",
          ),
        ).toBe(true);
      }
      expect(harness.errors).toEqual([]);
    } finally {
      await harness.stop();
      await cluster.stop();
      await rm(other, { recursive: true, force: true });
    }
  });
});
