import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./helpers.ts";

// The workload kinds of our install manifests, through the real kubectl: stored built-ins with
// defaulting, generation, status and scale subresources, strategic merge patch and server-side apply
// with upstream's list keys, Tables. Without the workload controllers (workloadControllers: false), so statuses
// are whatever a client writes; the controllers are tested in test/devkube/rollouts.test.ts and packages/devkube.

let h: Harness;

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: default }
spec:
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      containers:
        - name: app
          image: example/app:1
          env: [{ name: A, value: "1" }]
          ports: [{ containerPort: 8080 }]
`;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const getJson = async (args: string[]): Promise<Json> => JSON.parse(await h.ok(["get", ...args, "-o", "json"])) as Json;

beforeAll(async () => {
  h = await startHarness({ workloadControllers: false });
  await h.ok(["apply", "-f", "-"], DEPLOYMENT);
});
afterAll(async () => {
  await h?.close();
});

describe("Deployment", () => {
  it("is created with defaults and generation 1, and printed with kubectl's columns", async () => {
    const d = await getJson(["deployment", "web"]);
    expect(d.metadata.generation).toBe(1);
    expect(d.spec).toMatchObject({
      replicas: 1,
      revisionHistoryLimit: 10,
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } },
    });
    const table = await h.ok(["get", "deploy", "web"]);
    expect(table.split("\n")[0]).toMatch(/^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE$/);
    expect(table.split("\n")[1]).toMatch(/^web\s+0\/1\s+0\s+0\s+\d+s$/);
  });

  it("merges containers and env by name in a strategic merge patch, and bumps generation for spec changes only", async () => {
    await h.ok([
      "patch",
      "deployment",
      "web",
      "--type=strategic",
      "-p",
      JSON.stringify({
        spec: {
          template: {
            spec: {
              containers: [
                { name: "sidecar", image: "example/sidecar:1" },
                { name: "app", env: [{ name: "B", value: "2" }] },
              ],
            },
          },
        },
      }),
    ]);
    const d = await getJson(["deployment", "web"]);
    const containers = d.spec.template.spec.containers as Json[];
    expect(containers.map((c) => c.name).sort()).toEqual(["app", "sidecar"]);
    expect(containers.find((c) => c.name === "app")?.env).toEqual([
      { name: "A", value: "1" },
      { name: "B", value: "2" },
    ]);
    expect(containers.find((c) => c.name === "app")?.image).toBe("example/app:1");
    expect(d.metadata.generation).toBe(2);
    await h.ok(["label", "deployment", "web", "tier=front"]);
    expect((await getJson(["deployment", "web"])).metadata.generation).toBe(2);
    await h.ok(["set", "image", "deployment/web", "app=example/app:2"]);
    expect((await getJson(["deployment", "web"])).metadata.generation).toBe(3);
  });

  it("takes status through the status subresource only, and scales through the scale subresource", async () => {
    await h.ok([
      "patch",
      "deployment",
      "web",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { replicas: 1, readyReplicas: 1, updatedReplicas: 1, availableReplicas: 1 } }),
    ]);
    await h.ok(["patch", "deployment", "web", "--type=merge", "-p", JSON.stringify({ status: { readyReplicas: 7 } })]);
    const d = await getJson(["deployment", "web"]);
    expect(d.status).toEqual({ replicas: 1, readyReplicas: 1, updatedReplicas: 1, availableReplicas: 1 });
    expect(d.metadata.generation).toBe(3);
    expect((await h.ok(["get", "deploy", "web", "--no-headers"])).trim()).toMatch(/^web\s+1\/1\s+1\s+1\s+\d+s$/);
    await h.ok(["scale", "deployment", "web", "--replicas=3"]);
    const scaled = await getJson(["deployment", "web"]);
    expect(scaled.spec.replicas).toBe(3);
    expect(scaled.metadata.generation).toBe(4);
  });

  it("keeps the containers of two server-side appliers apart (list map keyed by name)", async () => {
    const applied = (container: string) => `apiVersion: apps/v1
kind: Deployment
metadata: { name: ssa, namespace: default }
spec:
  selector: { matchLabels: { app: ssa } }
  template:
    metadata: { labels: { app: ssa } }
    spec:
      containers: [{ name: ${container}, image: example/${container}:1 }]
`;
    await h.ok(["apply", "--server-side", "--field-manager=one", "-f", "-"], applied("app"));
    await h.ok(["apply", "--server-side", "--field-manager=two", "-f", "-"], applied("sidecar"));
    const d = await getJson(["deployment", "ssa", "--show-managed-fields"]);
    expect((d.spec.template.spec.containers as Json[]).map((c) => c.name).sort()).toEqual(["app", "sidecar"]);
    const two = (d.metadata.managedFields as Json[]).find((m) => m.manager === "two");
    expect(Object.keys(two?.fieldsV1["f:spec"]["f:template"]["f:spec"]["f:containers"] ?? {})).toContain(
      'k:{"name":"sidecar"}',
    );
    // the first applier drops its container: the other one's stays
    await h.ok(
      ["apply", "--server-side", "--field-manager=one", "-f", "-"],
      applied("app").replace(
        "containers: [{ name: app, image: example/app:1 }]",
        "containers: [{ name: extra, image: example/extra:1 }]",
      ),
    );
    const after = await getJson(["deployment", "ssa"]);
    expect((after.spec.template.spec.containers as Json[]).map((c) => c.name).sort()).toEqual(["extra", "sidecar"]);
  });

  it("refuses a selector that does not match the template labels, and a changed selector", async () => {
    const bad = await h.kubectl(
      ["apply", "-f", "-"],
      DEPLOYMENT.replace("name: web,", "name: bad,").replace("labels: { app: web }", "labels: { app: other }"),
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("spec.template.metadata.labels: Invalid value");
    expect(bad.stderr).toContain("`selector` does not match template `labels`");
    const changed = await h.kubectl([
      "patch",
      "deployment",
      "web",
      "--type=merge",
      "-p",
      JSON.stringify({
        spec: {
          selector: { matchLabels: { app: "web", x: "y" } },
          template: { metadata: { labels: { app: "web", x: "y" } } },
        },
      }),
    ]);
    expect(changed.stderr).toContain("field is immutable");
    expect((await h.kubectl(["get", "deployment", "bad"])).code).not.toBe(0);
  });

  it("refuses a rolling update that is not ints or percentages, or that may make no progress; defaults each bound", async () => {
    const strategy = (s: string) =>
      DEPLOYMENT.replace("name: web,", "name: strat,").replace(
        "spec:\n  selector",
        `spec:\n  strategy: ${s}\n  selector`,
      );
    const words = await h.kubectl(["apply", "-f", "-"], strategy("{ rollingUpdate: { maxSurge: lots } }"));
    expect(words.stderr).toContain(
      'spec.strategy.rollingUpdate.maxSurge: Invalid value: "lots": a valid percent string',
    );
    const over = await h.kubectl(["apply", "-f", "-"], strategy("{ rollingUpdate: { maxUnavailable: 150% } }"));
    expect(over.stderr).toContain("must not be greater than 100%");
    const stuck = await h.kubectl(
      ["apply", "-f", "-"],
      strategy("{ rollingUpdate: { maxUnavailable: 0, maxSurge: 0 } }"),
    );
    expect(stuck.stderr).toContain("may not be 0 when `maxSurge` is 0");
    const recreate = await h.kubectl(
      ["apply", "-f", "-"],
      strategy("{ type: Recreate, rollingUpdate: { maxSurge: 1 } }"),
    );
    expect(recreate.stderr).toContain("may not be specified when strategy `type` is 'Recreate'");
    expect((await h.kubectl(["get", "deployment", "strat"])).code).not.toBe(0);
    await h.ok(["apply", "-f", "-"], strategy("{ rollingUpdate: { maxSurge: 1 } }"));
    const d = await getJson(["deployment", "strat"]);
    expect(d.spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: "25%" } });
    await h.ok(["delete", "deployment", "strat"]);
  });
});

describe("the other kinds", () => {
  it("StatefulSet: defaults and Table", async () => {
    await h.ok(
      ["apply", "-f", "-"],
      DEPLOYMENT.replace("kind: Deployment", "kind: StatefulSet").replace("name: web,", "name: db,"),
    );
    const s = await getJson(["statefulset", "db"]);
    expect(s.spec).toMatchObject({
      replicas: 1,
      podManagementPolicy: "OrderedReady",
      updateStrategy: { type: "RollingUpdate" },
    });
    expect(s.metadata.generation).toBe(1);
    expect(await h.ok(["get", "sts"])).toMatch(/^NAME\s+READY\s+AGE\ndb\s+0\/1\s+\d+s\n$/);
  });

  it("Service: a cluster IP allocated once, ports merged by port, Table", async () => {
    const svc = `apiVersion: v1
kind: Service
metadata: { name: web, namespace: default }
spec:
  selector: { app: web }
  ports: [{ name: http, port: 80, targetPort: 8080 }]
`;
    await h.ok(["apply", "-f", "-"], svc);
    const s = await getJson(["service", "web"]);
    expect(s.spec).toMatchObject({
      type: "ClusterIP",
      clusterIPs: [s.spec.clusterIP],
      ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
    });
    expect(s.spec.clusterIP).toMatch(/^10\.96\.\d+\.\d+$/);
    await h.ok([
      "patch",
      "service",
      "web",
      "--type=strategic",
      "-p",
      JSON.stringify({ spec: { ports: [{ name: "metrics", port: 9090 }] } }),
    ]);
    await h.ok(["apply", "-f", "-"], svc.replace("app: web }", "app: web, tier: front }"));
    const after = await getJson(["service", "web"]);
    expect(after.spec.clusterIP).toBe(s.spec.clusterIP);
    expect((after.spec.ports as Json[]).map((p) => p.port).sort()).toEqual([80, 9090]);
    expect(await h.ok(["get", "svc", "web"])).toMatch(
      /^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\nweb\s+ClusterIP\s+10\.96\.\d+\.\d+\s+<none>\s+(80\/TCP,9090\/TCP|9090\/TCP,80\/TCP)\s+\d+s\n$/,
    );
  });

  it("PersistentVolumeClaim: Pending (nothing binds it), required fields, immutable spec, Table", async () => {
    const pvc = `apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: data, namespace: default }
spec:
  accessModes: [ReadWriteOnce]
  resources: { requests: { storage: 1Gi } }
`;
    await h.ok(["apply", "-f", "-"], pvc);
    expect((await getJson(["pvc", "data"])).status).toEqual({ phase: "Pending" });
    expect(await h.ok(["get", "pvc", "data"])).toMatch(
      /^NAME\s+STATUS\s+VOLUME\s+CAPACITY\s+ACCESS MODES\s+STORAGECLASS\s+VOLUMEATTRIBUTESCLASS\s+AGE\ndata\s+Pending\s+<unset>\s+<unset>\s+\d+s\n$/,
    );
    const missing = await h.kubectl(
      ["apply", "-f", "-"],
      pvc.replace("name: data,", "name: nomodes,").replace("  accessModes: [ReadWriteOnce]\n", ""),
    );
    expect(missing.stderr).toContain("spec.accessModes: Required value");
    const changed = await h.kubectl(["apply", "-f", "-"], pvc.replace("ReadWriteOnce", "ReadWriteMany"));
    expect(changed.stderr).toContain("spec is immutable after creation");
  });

  it("PodDisruptionBudget: status subresource, generation, mutually exclusive fields, Table", async () => {
    const pdb = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: { name: web, namespace: default }
spec:
  maxUnavailable: 1
  selector: { matchLabels: { app: web } }
`;
    await h.ok(["apply", "-f", "-"], pdb);
    await h.ok([
      "patch",
      "pdb",
      "web",
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { disruptionsAllowed: 1, currentHealthy: 1, desiredHealthy: 0, expectedPods: 1 } }),
    ]);
    expect(await h.ok(["get", "pdb", "web"])).toMatch(
      /^NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE\nweb\s+N\/A\s+1\s+1\s+\d+s\n$/,
    );
    await h.ok(["apply", "-f", "-"], pdb.replace("maxUnavailable: 1", "maxUnavailable: 2"));
    expect((await getJson(["pdb", "web"])).metadata.generation).toBe(2);
    const both = await h.kubectl(
      ["apply", "-f", "-"],
      pdb.replace("maxUnavailable: 1", "maxUnavailable: 1\n  minAvailable: 1").replace("name: web,", "name: both,"),
    );
    expect(both.stderr).toContain("minAvailable and maxUnavailable cannot be both set");
  });

  it("NetworkPolicy: policyTypes defaulted, Table", async () => {
    await h.ok(
      ["apply", "-f", "-"],
      `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: web, namespace: default }
spec:
  podSelector: { matchLabels: { app: web } }
  egress: [{ to: [{ podSelector: {} }] }]
`,
    );
    expect((await getJson(["netpol", "web"])).spec.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(await h.ok(["get", "networkpolicy", "web"])).toMatch(/^NAME\s+POD-SELECTOR\s+AGE\nweb\s+app=web\s+\d+s\n$/);
  });

  it("are deleted like any object (nothing runs them)", async () => {
    await h.ok(["delete", "deployment,statefulset,service,pvc,pdb,netpol", "--all", "-n", "default"]);
    expect(
      (await h.ok(["get", "deployment,statefulset,service,pvc,pdb,netpol", "-n", "default", "-o", "name"])).trim(),
    ).toBe("");
  });
});

describe("discovery, OpenAPI and watch", () => {
  it("publishes the kinds with short names, and PATCH operations with fieldValidation and their GVK", async () => {
    const resources = await h.ok(["api-resources", "--api-group=apps", "-o", "wide", "--no-headers"]);
    expect(resources).toMatch(
      /^deployments\s+deploy\s+apps\/v1\s+true\s+Deployment\s+create,delete,deletecollection,get,list,patch,update,watch\s+all$/m,
    );
    const doc = JSON.parse(await h.ok(["get", "--raw", "/openapi/v3/apis/policy/v1"])) as Json;
    const patch = doc.paths["/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"].patch as Json;
    expect(patch["x-kubernetes-group-version-kind"]).toEqual({
      group: "policy",
      version: "v1",
      kind: "PodDisruptionBudget",
    });
    expect((patch.parameters as Json[]).map((p) => p.name)).toContain("fieldValidation");
    expect(doc.paths["/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}/status"]).toBeDefined();
  });

  it("lists and watches from a resourceVersion", async () => {
    const list = JSON.parse(
      await h.ok(["get", "--raw", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"]),
    ) as Json;
    expect(list.kind).toBe("NetworkPolicyList");
    await h.ok(
      ["create", "-f", "-"],
      "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: { name: watched, namespace: default }\nspec: { podSelector: {} }\n",
    );
    const events = await h.ok([
      "get",
      "--raw",
      `/apis/networking.k8s.io/v1/namespaces/default/networkpolicies?watch=1&timeoutSeconds=1&resourceVersion=${String(list.metadata.resourceVersion)}`,
    ]);
    const first = JSON.parse(events.trim().split("\n")[0] ?? "{}") as Json;
    expect({ type: first.type, name: first.object?.metadata?.name }).toEqual({ type: "ADDED", name: "watched" });
  });
});

describe("kubectl's imperative generators (protobuf bodies)", () => {
  it.each([
    [
      ["create", "deployment", "gen", "--image=example/gen:1", "--port=80", "--replicas=2"],
      ["--", "sleep", "1"],
    ],
    [["create", "service", "nodeport", "gen"], ["--tcp=80:http"]],
    [
      ["expose", "deployment", "gen"],
      ["--name=gen-exposed", "--port=81"],
    ],
    [
      ["create", "poddisruptionbudget", "gen"],
      ["--selector=app=gen", "--min-available=50%"],
    ],
    [["create", "service", "externalname", "gen-ext"], ["--external-name=example.com"]],
  ])("%j creates what kubectl's client-side dry run shows", async (command, rest) => {
    const preview = JSON.parse(await h.ok([...command, "--dry-run=client", "-o", "json", ...rest])) as Json;
    await h.ok([...command, ...rest]);
    const kind = preview.kind === "Deployment" ? "deployment" : preview.kind === "Service" ? "service" : "pdb";
    const stored = await getJson([kind, String(preview.metadata.name)]);
    const template = preview.spec.template as Json | undefined;
    if (template) delete template.metadata.creationTimestamp;
    expect(stored.spec).toMatchObject(preview.spec);
    expect(stored.metadata).toMatchObject({ ...preview.metadata, creationTimestamp: expect.any(String) });
    expect(stored.metadata.generateName).toBeUndefined();
  });
});

describe("unknown fields", () => {
  it("are refused in specs and containers with kubectl's default strict validation, and pruned with --validate=false", async () => {
    const typo = DEPLOYMENT.replace("name: web,", "name: typo,")
      .replace(
        "          image: example/app:1\n",
        "          image: example/app:1\n          imagePullPolicey: Always\n",
      )
      .replace("spec:\n  selector", "spec:\n  replicaz: 2\n  selector");
    const strict = await h.kubectl(["apply", "--server-side", "-f", "-"], typo);
    expect(strict.code).not.toBe(0);
    expect(strict.stderr).toContain("replicaz");
    expect(strict.stderr).toContain("imagePullPolicey");
    await h.ok(["apply", "--server-side", "--validate=false", "-f", "-"], typo);
    const d = await getJson(["deployment", "typo"]);
    expect(d.spec.replicaz).toBeUndefined();
    expect(d.spec.template.spec.containers[0].imagePullPolicey).toBeUndefined();
    await h.ok(["delete", "deployment", "typo"]);
  });
});

describe("strategic merge patch of status conditions", () => {
  it("merges a PodDisruptionBudget's conditions by type", async () => {
    await h.ok(["create", "poddisruptionbudget", "conds", "--selector=app=conds", "--max-unavailable=1"]);
    const condition = (type: string, status: string) => ({
      type,
      status,
      reason: "Test",
      message: "",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    await h.ok([
      "patch",
      "pdb",
      "conds",
      "--subresource=status",
      "--type=strategic",
      "-p",
      JSON.stringify({ status: { conditions: [condition("DisruptionAllowed", "True")] } }),
    ]);
    await h.ok([
      "patch",
      "pdb",
      "conds",
      "--subresource=status",
      "--type=strategic",
      "-p",
      JSON.stringify({ status: { conditions: [condition("Other", "False")] } }),
    ]);
    const conditions = (await getJson(["pdb", "conds"])).status.conditions as Json[];
    expect(conditions.map((c) => c.type).sort()).toEqual(["DisruptionAllowed", "Other"]);
  });
});
