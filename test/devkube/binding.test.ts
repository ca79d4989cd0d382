import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./helpers.ts";

// pods/binding as a scheduler (kube-scheduler, kwok, test/support/harness-kubelet.ts) calls it through client-node:
// upstream's BindingREST sets spec.nodeName and PodScheduled=True in one write, once; a second binding is a 409.

let h: Harness;
let core: k8s.CoreV1Api;

beforeAll(async () => {
  h = await startHarness({ pods: { kubelet: false } });
  const kc = new k8s.KubeConfig();
  kc.loadFromString(h.devkube.kubeconfig);
  core = kc.makeApiClient(k8s.CoreV1Api);
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const pod = (name: string): k8s.V1Pod => ({
  metadata: { name },
  // another scheduler's pod: devkube's own scheduler leaves it unbound
  spec: { schedulerName: "elsewhere", containers: [{ name: "app", image: "example/app:1" }] },
});
const binding = (name: string, node: string, extra: Partial<k8s.V1Binding> = {}): k8s.V1Binding => ({
  apiVersion: "v1",
  kind: "Binding",
  metadata: { name },
  target: { apiVersion: "v1", kind: "Node", name: node },
  ...extra,
});
const statusOf = (err: unknown): { code: number | undefined; body: { message?: string; reason?: string } } => {
  const e = err as { code?: number; body?: string };
  return { code: e.code, body: JSON.parse(e.body ?? "{}") as { message?: string; reason?: string } };
};

describe("pods/binding", () => {
  it("binds an unbound pod: nodeName, PodScheduled=True and the Binding's annotations, answered Status Success 201", async () => {
    const created = await core.createNamespacedPod({ namespace: "default", body: pod("a") });
    expect(created.spec?.nodeName).toBeUndefined();
    const body = binding("a", "node-1", {
      metadata: { name: "a", uid: created.metadata!.uid!, annotations: { "example.com/why": "test" } },
    });
    // The answer is a Status (Success, 201), which client-node reads into its declared V1Binding.
    const answer = await core.createNamespacedPodBinding({ name: "a", namespace: "default", body });
    expect(answer.kind).toBe("Status");
    const bound = await core.readNamespacedPod({ name: "a", namespace: "default" });
    expect(bound.spec?.nodeName).toBe("node-1");
    expect(bound.metadata?.annotations?.["example.com/why"]).toBe("test");
    expect(bound.status?.conditions?.find((c) => c.type === "PodScheduled")?.status).toBe("True");
    expect(bound.status?.phase).toBe("Pending");
  });

  it("refuses a second binding, a stale uid, a name that differs from the URL's and a Binding with no target", async () => {
    await core.createNamespacedPod({ namespace: "default", body: pod("b") });
    await core.createNamespacedPodBinding({ name: "b", namespace: "default", body: binding("b", "node-1") });
    const again = await core
      .createNamespacedPodBinding({ name: "b", namespace: "default", body: binding("b", "node-2") })
      .catch(statusOf);
    expect(again).toMatchObject({
      code: 409,
      body: {
        reason: "Conflict",
        message: `Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "node-1"`,
      },
    });

    await core.createNamespacedPod({ namespace: "default", body: pod("c") });
    const stale = await core
      .createNamespacedPodBinding({
        name: "c",
        namespace: "default",
        body: binding("c", "node-1", { metadata: { name: "c", uid: "not-its-uid" } }),
      })
      .then(() => statusOf({}), statusOf);
    expect(stale.code).toBe(409);
    expect(stale.body?.message).toContain("Precondition failed: UID in precondition: not-its-uid");
    const misnamed = await core
      .createNamespacedPodBinding({ name: "c", namespace: "default", body: binding("d", "node-1") })
      .catch(statusOf);
    expect(misnamed).toMatchObject({
      code: 400,
      body: { message: "name in URL does not match name in Binding object" },
    });
    const targetless = await core
      .createNamespacedPodBinding({ name: "c", namespace: "default", body: { metadata: { name: "c" }, target: {} } })
      .catch(statusOf);
    // upstream answers ValidatePodBinding's errors as an internal error
    expect(targetless).toMatchObject({
      code: 500,
      body: { message: expect.stringContaining("target.name: Required value") },
    });
    expect((await core.readNamespacedPod({ name: "c", namespace: "default" })).spec?.nodeName).toBeUndefined();
  });

  it("is in discovery as pods/binding, create only", async () => {
    const resources = await core.getAPIResources();
    const sub = resources.resources.find((r) => r.name === "pods/binding");
    expect(sub).toMatchObject({ kind: "Binding", verbs: ["create"], namespaced: true });
  });
});
