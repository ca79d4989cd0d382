import * as k8s from "@kubernetes/client-node";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startDevkube } from "@mds/devkube";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startHarness, type Harness } from "./helpers.ts";

// The real kubectl's rollout commands against devkube's workload controllers and pod lifecycle: what an operator's
// rotation (and a person at a terminal) relies on to see a rollout progress, finish or get stuck.

let h: Harness;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const getJson = async (args: string[]): Promise<Json> => JSON.parse(await h.ok(["get", ...args, "-o", "json"])) as Json;

const deployment = (name: string, extra = "") => `apiVersion: apps/v1
kind: Deployment
metadata: { name: ${name}, namespace: default }
spec:
  replicas: 3
  selector: { matchLabels: { app: ${name} } }${extra}
  template:
    metadata: { labels: { app: ${name} } }
    spec:
      containers:
        - name: app
          image: example/app:1
          envFrom: [{ secretRef: { name: db } }]
`;

beforeAll(async () => {
  h = await startHarness({ pods: { readyDelayMs: 50 } });
});
afterAll(async () => {
  await h?.close();
});

describe("kubectl rollout against devkube", () => {
  it("rollout status waits for the pods and says the deployment rolled out; get shows ReplicaSet and pods", async () => {
    await h.ok(["apply", "-f", "-"], deployment("web"));
    const out = await h.ok(["rollout", "status", "deployment/web", "--timeout=60s"]);
    expect(out).toContain('deployment "web" successfully rolled out');
    const rs = (await getJson(["rs", "-l", "app=web"])).items as Json[];
    expect(rs).toHaveLength(1);
    const rsName = rs[0]?.metadata.name as string;
    expect(rsName).toMatch(/^web-[bcdfghjklmnpqrstvwxz2456789]+$/);
    const pods = await h.ok(["get", "pods", "-l", "app=web"]);
    expect(pods.split("\n")[0]).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
    expect(pods.trim().split("\n").slice(1)).toHaveLength(3);
    for (const line of pods.trim().split("\n").slice(1))
      expect(line).toMatch(new RegExp(`^${rsName}-\\w{5}\\s+1/1\\s+Running\\s+0\\s+`));
    // the "all" category lists the workload kinds with their columns
    const all = await h.ok(["get", "all"]);
    for (const kind of ["pod/web-", "deployment.apps/web", "replicaset.apps/web-"]) expect(all).toContain(kind);
    const deploy = await h.ok(["get", "deploy", "web"]);
    expect(deploy.split("\n")[1]).toMatch(/^web\s+3\/3\s+3\s+3\s+/);
    // the pods carry what a kubelet needs from the template
    const pod = ((await getJson(["pods", "-l", "app=web"])).items as Json[])[0] as Json;
    expect(pod.spec.containers[0].envFrom).toEqual([{ secretRef: { name: "db" } }]);
    expect(pod.spec.nodeName).toBe("devkube-node");
    // the Events the controllers record, as kubectl describe shows them
    expect(await h.ok(["describe", "deployment", "web"])).toMatch(
      new RegExp(`ScalingReplicaSet\\s.*Scaled up replica set ${rsName} from 0 to 3`),
    );
    expect(await h.ok(["describe", "rs", rsName])).toMatch(/SuccessfulCreate\s.*Created pod: /);
    const described = await h.ok(["describe", "pod", pod.metadata.name]);
    expect(described).toMatch(/Scheduled\s.*Successfully assigned default\/\S+ to devkube-node/);
    expect(described).toMatch(/Started\s.*Started container app/);
  });

  it("rollout restart rolls every pod onto a new ReplicaSet; history shows two revisions", async () => {
    const before = new Set(((await getJson(["pods", "-l", "app=web"])).items as Json[]).map((p) => p.metadata.name));
    expect(await h.ok(["rollout", "restart", "deployment/web"])).toContain("deployment.apps/web restarted");
    const out = await h.ok(["rollout", "status", "deployment/web", "--timeout=60s"]);
    expect(out).toContain('deployment "web" successfully rolled out');
    const pods = (await getJson(["pods", "-l", "app=web"])).items as Json[];
    expect(pods).toHaveLength(3);
    for (const p of pods) {
      expect(before.has(p.metadata.name)).toBe(false);
      expect(p.metadata.annotations["kubectl.kubernetes.io/restartedAt"]).toBeTruthy();
    }
    const d = (await getJson(["deploy", "web"])) as Json;
    expect(d.metadata.annotations["deployment.kubernetes.io/revision"]).toBe("2");
    expect(d.status.observedGeneration).toBe(d.metadata.generation);
    const history = await h.ok(["rollout", "history", "deployment/web"]);
    expect(history).toMatch(/^1\s/m);
    expect(history).toMatch(/^2\s/m);
  });

  it("rollout status of a rollout whose pods never become ready fails with the progress deadline", async () => {
    await h.ok(["apply", "-f", "-"], deployment("stuck", "\n  progressDeadlineSeconds: 2"));
    await h.ok(["rollout", "status", "deployment/stuck", "--timeout=60s"]);
    await h.ok([
      "patch",
      "deployment",
      "stuck",
      "-p",
      JSON.stringify({ spec: { template: { metadata: { annotations: { "devkube.mds.dev/ready": "false" } } } } }),
    ]);
    const r = await h.kubectl(["rollout", "status", "deployment/stuck", "--timeout=60s"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('deployment "stuck" exceeded its progress deadline');
    const d = (await getJson(["deploy", "stuck"])) as Json;
    expect(d.status.availableReplicas).toBe(3);
    // a later successful rollout settles it
    await h.ok(["rollout", "undo", "deployment/stuck"]);
    expect(await h.ok(["rollout", "status", "deployment/stuck", "--timeout=60s"])).toContain("successfully rolled out");
  });

  it("rollout status and restart of a StatefulSet and a DaemonSet; history from ControllerRevisions", async () => {
    const pod = `
  template:
    metadata: { labels: { app: NAME } }
    spec: { containers: [{ name: app, image: example/app:1 }] }`;
    await h.ok(
      ["apply", "-f", "-"],
      `apiVersion: apps/v1
kind: StatefulSet
metadata: { name: db, namespace: default }
spec:
  replicas: 2
  serviceName: db
  selector: { matchLabels: { app: db } }${pod.replace("NAME", "db")}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: { name: agent, namespace: default }
spec:
  selector: { matchLabels: { app: agent } }${pod.replace("NAME", "agent")}
`,
    );
    expect(await h.ok(["rollout", "status", "statefulset/db", "--timeout=60s"])).toContain(
      "partitioned roll out complete: 2 new pods have been updated...",
    );
    expect(await h.ok(["rollout", "status", "daemonset/agent", "--timeout=60s"])).toContain(
      'daemon set "agent" successfully rolled out',
    );
    const before = (await getJson(["statefulset", "db"])) as Json;
    await h.ok(["rollout", "restart", "statefulset/db"]);
    await h.ok(["rollout", "restart", "daemonset/agent"]);
    expect(await h.ok(["rollout", "status", "statefulset/db", "--timeout=60s"])).toContain("roll out complete");
    expect(await h.ok(["rollout", "status", "daemonset/agent", "--timeout=60s"])).toContain("successfully rolled out");
    const after = (await getJson(["statefulset", "db"])) as Json;
    expect(after.status.updateRevision).not.toBe(before.status.updateRevision);
    const pods = (await getJson(["pods", "-l", "app=db"])).items as Json[];
    expect(pods.map((p) => p.metadata.name).sort()).toEqual(["db-0", "db-1"]);
    for (const p of pods) expect(p.metadata.labels["controller-revision-hash"]).toBe(after.status.updateRevision);
    expect(await h.ok(["rollout", "history", "statefulset/db"])).toMatch(/^2\s/m);
    const ds = await h.ok(["get", "ds", "agent"]);
    expect(ds.split("\n")[1]).toMatch(/^agent\s+1\s+1\s+1\s+1\s+1\s+<none>\s+/);
  });

  it("rollout pause/resume, scale, and delete: the pods follow, then go with their Deployment and namespace", async () => {
    await h.ok(["create", "namespace", "team"]);
    await h.ok(["apply", "-n", "team", "-f", "-"], deployment("api").replace("namespace: default", "namespace: team"));
    await h.ok(["rollout", "status", "-n", "team", "deployment/api", "--timeout=60s"]);
    await h.ok(["rollout", "pause", "-n", "team", "deployment/api"]);
    await h.ok(["set", "env", "-n", "team", "deployment/api", "B=2"]);
    // once the paused Deployment's new generation is observed, still no new ReplicaSet
    await eventually(async () => {
      const d = await getJson(["deploy", "-n", "team", "api"]);
      expect(d.status.observedGeneration).toBe(d.metadata.generation);
      expect(d.status.conditions).toContainEqual(expect.objectContaining({ reason: "DeploymentPaused" }));
    });
    expect(((await getJson(["rs", "-n", "team"])).items as Json[]).length).toBe(1);
    await h.ok(["rollout", "resume", "-n", "team", "deployment/api"]);
    await h.ok(["rollout", "status", "-n", "team", "deployment/api", "--timeout=60s"]);
    await h.ok(["scale", "-n", "team", "deployment/api", "--replicas=1"]);
    await h.ok(["rollout", "status", "-n", "team", "deployment/api", "--timeout=60s"]);
    const pods = (await getJson(["pods", "-n", "team"])).items as Json[];
    expect(pods).toHaveLength(1);
    expect(pods[0]?.spec.containers[0].env).toEqual([{ name: "B", value: "2" }]);
    await h.ok(["delete", "-n", "team", "deployment/api", "--cascade=foreground"]);
    expect(await h.ok(["get", "rs,pods", "-n", "team", "-o", "name"])).toBe("");
    await h.ok(["apply", "-n", "team", "-f", "-"], deployment("api").replace("namespace: default", "namespace: team"));
    await h.ok(["rollout", "status", "-n", "team", "deployment/api", "--timeout=60s"]);
    await h.ok(["delete", "namespace", "team", "--timeout=60s"]);
    const r = await h.kubectl(["get", "namespace", "team"]);
    expect(r.stderr).toContain('namespaces "team" not found');
  });
});

describe("what a test harness that runs an app per pod sees", () => {
  it("a client-node informer on pods: Running and Ready with the template's env, deleted on a restart", async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromString(h.devkube.kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const informer = k8s.makeInformer(
      kc,
      "/api/v1/namespaces/default/pods",
      () => core.listNamespacedPod({ namespace: "default", labelSelector: "app=shop" }),
      "app=shop",
    );
    const running = new Map<string, k8s.V1Pod>();
    const deleted: string[] = [];
    const seen = (p: k8s.V1Pod) => {
      const ready = p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      if (p.status?.phase === "Running" && ready) running.set(p.metadata?.name ?? "", p);
    };
    informer.on("add", seen);
    informer.on("update", seen);
    informer.on("delete", (p) => deleted.push(p.metadata?.name ?? ""));
    informer.on("error", () => undefined);
    await informer.start();
    await h.ok(["apply", "-f", "-"], deployment("shop").replace("replicas: 3", "replicas: 2"));
    await h.ok(["rollout", "status", "deployment/shop", "--timeout=60s"]);
    await eventually(() => running.size === 2);
    const first = [...running.values()][0] as k8s.V1Pod;
    expect(first.spec?.containers[0]?.envFrom).toEqual([{ secretRef: { name: "db" } }]);
    expect(first.status?.containerStatuses?.[0]?.state?.running?.startedAt).toBeTruthy();
    const before = [...running.keys()];
    await h.ok(["rollout", "restart", "deployment/shop"]);
    await h.ok(["rollout", "status", "deployment/shop", "--timeout=60s"]);
    await eventually(() => expect(deleted.sort()).toEqual(before.sort()));
    await informer.stop();
  });

  it("a restarted devkube goes on with the rollouts it had stored", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "devkube-restart-"));
    try {
      // pods that would take a minute to start: stopped before any is Ready
      let kube = await startDevkube({ dir, pods: { readyDelayMs: 60_000 } });
      const kc = new k8s.KubeConfig();
      kc.loadFromString(kube.kubeconfig);
      const apps = kc.makeApiClient(k8s.AppsV1Api);
      await apps.createNamespacedDeployment({
        namespace: "default",
        body: {
          metadata: { name: "later" },
          spec: {
            replicas: 2,
            selector: { matchLabels: { app: "later" } },
            template: { metadata: { labels: { app: "later" } }, spec: { containers: [{ name: "c", image: "x" }] } },
          },
        },
      });
      await kube.stop();
      kube = await startDevkube({ dir, pods: { readyDelayMs: 10 } });
      const again = new k8s.KubeConfig();
      again.loadFromString(kube.kubeconfig);
      const apps2 = again.makeApiClient(k8s.AppsV1Api);
      try {
        await eventually(async () => {
          const d = await apps2.readNamespacedDeployment({ name: "later", namespace: "default" });
          expect(d.status?.availableReplicas).toBe(2);
        });
        const pods = await again.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: "default" });
        expect(pods.items).toHaveLength(2);
      } finally {
        await kube.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
