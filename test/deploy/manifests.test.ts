// The install manifests, rendered by the real kubectl's kustomize and checked against Kubernetes' published
// schemas and the promises of deploy/README.md: CRDs by reference, least-privilege RBAC, two leader-elected
// replicas under the restricted Pod Security profile, probes, resources, metrics Service, NetworkPolicy.
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { kubectl } from "./kubectl.ts";
import { mdsCrdNames } from "../../src/webhook/crd-ca-bundle.ts";
import { describeObject, validateKubernetesObject, type KubeObjectLike } from "./kubernetes-schema.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const installs = {
  default: "deploy",
  singleNamespace: "deploy/overlays/single-namespace",
  withService: "deploy/overlays/with-service",
  // The default install plus components/monitoring (its own checks, promtool's included: monitoring.test.ts).
  withMonitoring: "deploy/overlays/with-monitoring",
  // Rotation that follows its consumers (components/rotation-consumers and its namespaced twin).
  withRotationConsumers: "deploy/overlays/with-rotation-consumers",
  singleNamespaceRotationConsumers: "deploy/overlays/single-namespace-rotation-consumers",
} as const;
type Install = keyof typeof installs;

interface Obj extends KubeObjectLike {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}
interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface Container {
  name: string;
  args?: string[];
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[]; add?: string[] }; seccompProfile?: { type: string } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: unknown;
  readinessProbe?: unknown;
  ports?: { name?: string; containerPort: number }[];
}
interface PodSpec {
  securityContext?: { runAsNonRoot?: boolean; seccompProfile?: { type: string } };
  containers: Container[];
  initContainers?: Container[];
  volumes?: Record<string, unknown>[];
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  serviceAccountName?: string;
}

const rendered = {} as Record<Install, Obj[]>;

beforeAll(async () => {
  for (const [install, dir] of Object.entries(installs) as [Install, string][]) {
    const result = await kubectl(["kustomize", dir]);
    if (result.code !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${result.stderr}`);
    rendered[install] = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
  }
});

const find = (install: Install, kind: string, name: string) => {
  const o = rendered[install].find((x) => x.kind === kind && x.metadata.name === name);
  if (o === undefined) throw new Error(`${installs[install]} renders no ${kind} ${name}`);
  return o;
};
const podSpecOf = (o: Obj) => (o as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
const workloads = (install: Install) => rendered[install].filter((o) => ["Deployment", "StatefulSet", "DaemonSet", "Job"].includes(o.kind));
const rulesOf = (o: Obj) => (o as unknown as { rules: PolicyRule[] }).rules;

describe.each(Object.keys(installs) as Install[])("%s install", (install) => {
  it("renders and every object is valid against the Kubernetes API schemas, with no unknown field", async () => {
    expect(rendered[install].length).toBeGreaterThan(10);
    // The Prometheus Operator's kinds are not Kubernetes' own: monitoring.test.ts checks them (and promtool the rules).
    const problems = (await Promise.all(rendered[install].filter((o) => !o.apiVersion.startsWith("monitoring.coreos.com/")).map(validateKubernetesObject))).flat();
    expect(problems).toEqual([]);
  });

  it("has a namespace for every namespaced object, under the restricted Pod Security profile", () => {
    const namespaces = rendered[install].filter((o) => o.kind === "Namespace");
    expect(namespaces.map((n) => n.metadata.name)).toEqual(["mds-system"]);
    const labels = namespaces[0]?.metadata.labels ?? {};
    for (const mode of ["enforce", "audit", "warn"]) expect(labels[`pod-security.kubernetes.io/${mode}`]).toBe("restricted");
    const clusterScoped = ["Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"];
    for (const o of rendered[install].filter((x) => !clusterScoped.includes(x.kind))) expect({ o: describeObject(o), ns: o.metadata.namespace }).toEqual({ o: describeObject(o), ns: "mds-system" });
    // kustomize does not know the admission policy kinds are cluster-scoped; deploy/transformers takes the namespace off
    for (const o of rendered[install].filter((x) => clusterScoped.includes(x.kind))) expect({ o: describeObject(o), ns: o.metadata.namespace }).toEqual({ o: describeObject(o), ns: undefined });
  });

  it("runs every container under the restricted profile, with probes, requests and limits", () => {
    const allowedVolumes = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
    expect(workloads(install).length).toBeGreaterThan(0);
    for (const workload of workloads(install)) {
      const pod = podSpecOf(workload);
      const where = describeObject(workload);
      expect({ where, runAsNonRoot: pod.securityContext?.runAsNonRoot, seccomp: pod.securityContext?.seccompProfile?.type }).toEqual({ where, runAsNonRoot: true, seccomp: "RuntimeDefault" });
      expect({ where, host: [pod.hostNetwork, pod.hostPID, pod.hostIPC].some(Boolean) }).toEqual({ where, host: false });
      for (const volume of pod.volumes ?? []) {
        const type = Object.keys(volume).find((k) => k !== "name") ?? "";
        expect({ where, type, allowed: allowedVolumes.includes(type) }).toEqual({ where, type, allowed: true });
      }
      for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
        const at = `${where} container ${c.name}`;
        expect({ at, ...c.securityContext }).toMatchObject({ at, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] }, seccompProfile: { type: "RuntimeDefault" } });
        expect({ at, add: c.securityContext?.capabilities?.add }).toEqual({ at, add: undefined });
        expect({ at, requests: Object.keys(c.resources?.requests ?? {}).sort(), limits: Object.keys(c.resources?.limits ?? {}).sort() }).toEqual({ at, requests: ["cpu", "memory"], limits: ["cpu", "memory"] });
      }
      // Init containers run to completion before the pod starts: Kubernetes refuses probes on them.
      for (const c of pod.containers) {
        const at = `${where} container ${c.name}`;
        expect({ at, liveness: c.livenessProbe !== undefined, readiness: c.readinessProbe !== undefined }).toEqual({ at, liveness: true, readiness: true });
      }
      for (const c of pod.initContainers ?? []) expect({ at: `${where} init container ${c.name}`, probes: [c.livenessProbe, c.readinessProbe].filter(Boolean) }).toEqual({ at: `${where} init container ${c.name}`, probes: [] });
    }
  });

  it("runs two operator replicas with leader election, probed on the health server", () => {
    const deployment = find(install, "Deployment", "mds-operator") as unknown as { spec: { replicas: number; template: { spec: PodSpec } } };
    expect(deployment.spec.replicas).toBe(2);
    const pod = deployment.spec.template.spec;
    expect(pod.serviceAccountName).toBe("mds-operator");
    const [operator] = pod.containers;
    expect(operator?.args).toContain("--leader-elect");
    expect(operator?.livenessProbe).toMatchObject({ httpGet: { path: "/healthz", port: "http-metrics" } });
    expect(operator?.readinessProbe).toMatchObject({ httpGet: { path: "/readyz", port: "http-metrics" } });
    expect(operator?.ports).toEqual([{ name: "http-metrics", containerPort: 8080, protocol: "TCP" }]);
    const pdb = find(install, "PodDisruptionBudget", "mds-operator") as unknown as { spec: { minAvailable: number } };
    expect(pdb.spec.minAvailable).toBe(1);
  });

  it("exposes metrics through a Service that selects the operator's pods", () => {
    const service = find(install, "Service", "mds-operator-metrics") as unknown as { spec: { selector: Record<string, string>; ports: { targetPort: string }[] } };
    const deployment = find(install, "Deployment", "mds-operator") as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } };
    expect(deployment.spec.template.metadata.labels).toMatchObject(service.spec.selector);
    expect(service.spec.ports.map((p) => p.targetPort)).toEqual(["http-metrics"]);
  });

  it("denies all traffic to and from the operator except DNS, the API server, the service API and metrics", () => {
    const policy = find(install, "NetworkPolicy", "mds-operator") as unknown as {
      spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: { ports: { port: string | number }[] }[]; egress: { ports: { port: number; protocol: string }[] }[] };
    };
    expect(policy.spec.podSelector.matchLabels).toEqual({ "app.kubernetes.io/name": "mds-operator" });
    expect(policy.spec.policyTypes.sort()).toEqual(["Egress", "Ingress"]);
    expect(policy.spec.ingress.flatMap((r) => r.ports.map((p) => p.port))).toEqual(["http-metrics"]);
    const egressPorts = policy.spec.egress.flatMap((r) => r.ports.map((p) => `${p.protocol}/${p.port}`));
    expect(egressPorts).toEqual(expect.arrayContaining(["UDP/53", "TCP/53", "TCP/443", "TCP/6443"]));
  });

  it("grants no wildcard and none of escalate, bind or impersonate", () => {
    for (const role of rendered[install].filter((o) => o.kind === "Role" || o.kind === "ClusterRole")) {
      for (const rule of rulesOf(role)) {
        const all = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs, ...(rule.resourceNames ?? [])];
        expect({ role: describeObject(role), wildcards: all.filter((x) => x.includes("*")) }).toEqual({ role: describeObject(role), wildcards: [] });
        expect(rule.verbs.filter((v) => ["escalate", "bind", "impersonate"].includes(v))).toEqual([]);
      }
    }
  });

  it("contains the CRDs of crds/ unchanged (referenced, not copied)", async () => {
    const files = (await readdir(join(repoRoot, "crds"))).filter((f) => f.endsWith(".yaml"));
    const generated = await Promise.all(files.map(async (f) => parse(await readFile(join(repoRoot, "crds", f), "utf8")) as Obj));
    const installed = rendered[install].filter((o) => o.kind === "CustomResourceDefinition");
    expect(installed.map((o) => o.metadata.name).sort()).toEqual(generated.map((o) => o.metadata.name).sort());
    for (const crd of generated) {
      const copy = installed.find((o) => o.metadata.name === crd.metadata.name);
      // kustomize only adds the install's common labels.
      const { labels: _l, ...metadata } = copy?.metadata ?? { name: "" };
      const { labels: _g, ...generatedMetadata } = crd.metadata;
      expect({ ...copy, metadata }).toEqual({ ...crd, metadata: generatedMetadata });
    }
  });
});

// What the operator calls, from src/operator/ and src/resources/*/controller.ts. The ClusterRole (or the
// single-namespace Role) must grant exactly this; rbac-e2e.test.ts runs the operator with it and proves nothing is
// missing and every rule is used.
const operatorRules: PolicyRule[] = [
  { apiGroups: ["mds.dev"], resources: ["projects"], verbs: ["get", "list", "watch", "patch"] },
  { apiGroups: ["mds.dev"], resources: ["databases"], verbs: ["get", "list", "watch", "patch"] },
  { apiGroups: ["mds.dev"], resources: ["databaserestores"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["mds.dev"], resources: ["connections"], verbs: ["get", "list", "watch", "patch"] },
  { apiGroups: ["mds.dev"], resources: ["databasebackups"], verbs: ["get", "list", "watch", "create", "delete"] },
  { apiGroups: ["mds.dev"], resources: ["backupschedules"], verbs: ["get", "list", "watch"] },
  {
    apiGroups: ["mds.dev"],
    resources: ["projects/status", "databases/status", "databaserestores/status", "connections/status", "databasebackups/status", "backupschedules/status"],
    verbs: ["patch"],
  },
  { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch", "create", "update", "patch", "delete"] },
  { apiGroups: [""], resources: ["events"], verbs: ["create"] },
];

describe("RBAC", () => {
  it("grants the operator exactly the calls it makes, cluster-wide by default", () => {
    expect(rulesOf(find("default", "ClusterRole", "mds-operator"))).toEqual(operatorRules);
    const binding = find("default", "ClusterRoleBinding", "mds-operator") as unknown as { roleRef: unknown; subjects: unknown[] };
    expect(binding.roleRef).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "mds-operator" });
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "mds-operator", namespace: "mds-system" }]);
  });

  it("lets the operator read only whether the deletion-protection policy and a Deny binding of it exist", () => {
    expect(rulesOf(find("default", "ClusterRole", "mds-operator-admission-read"))).toEqual([
      { apiGroups: ["admissionregistration.k8s.io"], resources: ["validatingadmissionpolicies"], resourceNames: ["mds-deletion-protection"], verbs: ["get"] },
      { apiGroups: ["admissionregistration.k8s.io"], resources: ["validatingadmissionpolicybindings"], verbs: ["list"] },
    ]);
    const binding = find("default", "ClusterRoleBinding", "mds-operator-admission-read") as unknown as { roleRef: unknown; subjects: unknown[] };
    expect(binding.roleRef).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "mds-operator-admission-read" });
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "mds-operator", namespace: "mds-system" }]);
  });

  it("limits leader election to one Lease and the credentials to one Secret in the operator's namespace", () => {
    expect(rulesOf(find("default", "Role", "mds-operator-leader-election"))).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: ["mds-operator"], verbs: ["get", "update"] },
    ]);
    expect(rulesOf(find("default", "Role", "mds-operator-credentials"))).toEqual([
      { apiGroups: [""], resources: ["secrets"], resourceNames: ["mds-credentials"], verbs: ["get"] },
    ]);
  });

  // The conversion webhook: what src/webhook calls (the CRDs' caBundle, its own certificate Secret), in every install.
  const webhookClusterRules: PolicyRule[] = [
    { apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["list", "watch"] },
    {
      apiGroups: ["apiextensions.k8s.io"],
      resources: ["customresourcedefinitions"],
      resourceNames: mdsCrdNames.slice().sort(),
      verbs: ["get", "patch"],
    },
  ];
  it.each(Object.keys(installs) as Install[])("%s: lets the conversion webhook patch only the six CRDs and touch only its certificate Secret", (install) => {
    const clusterRule = rulesOf(find(install, "ClusterRole", "mds-webhook")).map((r) => ({ ...r, ...(r.resourceNames ? { resourceNames: [...r.resourceNames].sort() } : {}) }));
    expect(clusterRule).toEqual(webhookClusterRules);
    expect(rulesOf(find(install, "Role", "mds-webhook"))).toEqual([
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      { apiGroups: [""], resources: ["secrets"], resourceNames: ["mds-webhook-tls"], verbs: ["get", "update"] },
    ]);
    const crd = find(install, "CustomResourceDefinition", "databases.mds.dev") as unknown as { spec: { conversion: unknown } };
    const webhook = find(install, "Service", "mds-webhook");
    expect(crd.spec.conversion).toMatchObject({
      strategy: "Webhook",
      webhook: { clientConfig: { service: { name: "mds-webhook", namespace: webhook.metadata.namespace, path: "/convert", port: 443 } } },
    });
  });

  it("uses only namespaced Roles in single-namespace mode, with the same rules (the webhook's CRD rule aside)", () => {
    // CRDs are cluster-scoped: the webhook's ClusterRole, on the six mds.dev CRDs alone, is the one left.
    const clusterScoped = rendered.singleNamespace.filter((o) => o.kind === "ClusterRole" || o.kind === "ClusterRoleBinding");
    expect(clusterScoped.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(["ClusterRole/mds-webhook", "ClusterRoleBinding/mds-webhook"]);
    expect(rulesOf(find("singleNamespace", "Role", "mds-operator"))).toEqual(operatorRules);
    const args = podSpecOf(find("singleNamespace", "Deployment", "mds-operator")).containers[0]?.args ?? [];
    expect(args).toContain("--namespaces=$(POD_NAMESPACE)");
  });

  it("adds rotation consumers' rights only with its component: read pods and workloads, patch only workloads", () => {
    const consumerRules: PolicyRule[] = [
      { apiGroups: ["apps"], resources: ["deployments", "statefulsets", "daemonsets"], verbs: ["list", "watch", "patch"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] },
    ];
    const argsOf = (install: Install) => podSpecOf(find(install, "Deployment", "mds-operator")).containers[0]?.args ?? [];
    expect(rulesOf(find("withRotationConsumers", "ClusterRole", "mds-operator-rotation-consumers"))).toEqual(consumerRules);
    expect(rulesOf(find("withRotationConsumers", "ClusterRole", "mds-operator"))).toEqual(operatorRules);
    expect(argsOf("withRotationConsumers")).toContain("--rotation-consumers");
    const binding = find("withRotationConsumers", "ClusterRoleBinding", "mds-operator-rotation-consumers") as unknown as { subjects: unknown[] };
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "mds-operator", namespace: "mds-system" }]);
    // Namespaced: the same rules as a Role; the webhook's ClusterRole on the six CRDs is the only cluster-scoped one.
    const clusterRoles = rendered.singleNamespaceRotationConsumers.filter((o) => o.kind === "ClusterRole");
    expect(clusterRoles.map((o) => o.metadata.name)).toEqual(["mds-webhook"]);
    expect(rulesOf(find("singleNamespaceRotationConsumers", "Role", "mds-operator-rotation-consumers"))).toEqual(consumerRules);
    expect(argsOf("singleNamespaceRotationConsumers")).toEqual(expect.arrayContaining(["--rotation-consumers", "--namespaces=$(POD_NAMESPACE)"]));
    // Without the component: none of it.
    for (const install of ["default", "singleNamespace", "withService", "withMonitoring"] as const) {
      expect(rendered[install].filter((o) => o.metadata.name === "mds-operator-rotation-consumers")).toEqual([]);
      expect(argsOf(install)).not.toContain("--rotation-consumers");
    }
  });

  it("gives the service pod no Kubernetes API token", () => {
    for (const name of ["mds-service"]) {
      const pod = podSpecOf(find("withService", "Deployment", name)) as PodSpec & { automountServiceAccountToken?: boolean };
      expect(pod.automountServiceAccountToken).toBe(false);
    }
  });
});

describe("deletion protection", () => {
  interface Policy { spec: { failurePolicy: string; matchConstraints: { resourceRules: Record<string, string[]>[] }; validations: { expression: string; reason?: string; message?: string; messageExpression?: string }[] } }
  interface Binding { spec: { policyName: string; validationActions: string[]; matchResources?: unknown } }

  it.each(Object.keys(installs) as Install[])("%s: a ValidatingAdmissionPolicy denies DELETE of Projects, Databases and Connections whose old object has spec.deletionProtection true", (install) => {
    const policy = find(install, "ValidatingAdmissionPolicy", "mds-deletion-protection") as unknown as Policy;
    expect(policy.spec.failurePolicy).toBe("Fail");
    expect(policy.spec.matchConstraints.resourceRules).toEqual([{ apiGroups: ["mds.dev"], apiVersions: ["*"], operations: ["DELETE"], resources: ["projects", "databases", "connections"], scope: "Namespaced" }]);
    expect(policy.spec.validations).toHaveLength(1);
    const [validation] = policy.spec.validations;
    expect(validation?.expression).toContain("oldObject.spec.deletionProtection");
    expect(validation?.reason).toBe("Forbidden");
    for (const text of [validation?.message, validation?.messageExpression]) expect(text).toMatch(/set it to false first.*then delete/);
    const binding = find(install, "ValidatingAdmissionPolicyBinding", "mds-deletion-protection") as unknown as Binding;
    expect(binding.spec).toEqual({ policyName: "mds-deletion-protection", validationActions: ["Deny"] });
  });
});

describe("crds/Kustomization", () => {
  it("lists exactly the generated CRD files, so a new kind cannot be left out of the install", async () => {
    const files = (await readdir(join(repoRoot, "crds"))).filter((f) => f.endsWith(".yaml")).sort();
    const kustomization = parse(await readFile(join(repoRoot, "crds", "Kustomization"), "utf8")) as { resources: string[] };
    expect([...kustomization.resources].sort()).toEqual(files);
  });

  it("copies no CRD into deploy/", async () => {
    const found: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (/\.ya?ml$/.test(entry.name) && (await readFile(path, "utf8")).includes("kind: CustomResourceDefinition")) found.push(path);
      }
    };
    await walk(join(repoRoot, "deploy"));
    expect(found).toEqual([]);
  });
});

describe("deploy/README.md's overlay example", () => {
  it("renders as documented: the image and the MDS_* options merged into the operator's ConfigMap", async () => {
    const readme = await readFile(join(repoRoot, "deploy", "README.md"), "utf8");
    const example = /^ *```yaml\n *# my-mds\/kustomization.yaml\n([\s\S]*?)^ *```/m.exec(readme)?.[1];
    expect(example).toBeDefined();
    // The example sits beside a checkout named mds (resources: ../mds/deploy).
    const dir = await mkdtemp(join(tmpdir(), "mds-overlay-"));
    try {
      await symlink(repoRoot, join(dir, "mds"));
      await mkdir(join(dir, "my-mds"));
      await writeFile(join(dir, "my-mds", "kustomization.yaml"), (example ?? "").replace(/^ {3}/gm, ""));
      const result = await kubectl(["kustomize", join(dir, "my-mds")]);
      expect(result.stderr).toBe("");
      const objects = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
      const configMap = objects.find((o) => o.kind === "ConfigMap") as unknown as { metadata: { name: string }; data: Record<string, string> };
      expect(configMap.data).toMatchObject({ MDS_API_URL: "https://mds.example.com", MDS_INSTANCE_ID: "prod-eu-1" });
      const pod = podSpecOf(objects.find((o) => o.kind === "Deployment") as Obj) as PodSpec & { containers: (Container & { image: string; envFrom: { configMapRef: { name: string } }[] })[] };
      expect(pod.containers[0]?.image).toBe(`registry.example.com/mds:${(JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string }).version}`);
      expect(pod.containers[0]?.envFrom[0]?.configMapRef.name).toBe(configMap.metadata.name);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
