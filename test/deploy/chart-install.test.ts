// `helm install mds charts/mds`, then `kubectl apply -f examples/`, gives an application a working DATABASE_URL;
// then `helm upgrade` to a changed value, `helm rollback` and `helm uninstall`, with the real helm 3 and kubectl.
// On devkube by default; on the cluster of MDS_E2E_KUBECONFIG (docs/e2e.md) in a namespace of its own.
// No kubelet runs the operator's pods on devkube, and on a real cluster they could not reach the service on this
// machine: the operator runs in the test process instead, with the options the installed Deployment and ConfigMap
// give it (read back from the API server) and a token of the chart's ServiceAccount, so the chart's RBAC is what
// the API server enforces. `helm test` runs its hook pod on devkube through test-pod-kubelet.ts, which plays the
// kubelet and routes the pod's connection to the Service to that in-process operator's health port. On a real
// cluster the hook pod would need the operator's image in a registry the cluster pulls from, and a Service with
// running operator pods behind it (here replicas=0): `helm test` is devkube's part only.
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import { parseOperatorConfig } from "../../src/cli/operator-config.ts";
import { createOperatorWithKinds, startOperatorRuntime, type OperatorRuntime } from "../../src/cli/operator.ts";
import { parseKubeConfig, type KubeConfig } from "../../src/kube/kubeconfig.ts";
import { realClusterFromEnv } from "../e2e/helpers.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { serviceWebhook, type WebhookProcess } from "../support/webhook-process.ts";
import { containerOptions } from "./container-options.ts";
import { chartDir, helm } from "./helm.ts";
import { kubectl } from "./kubectl.ts";
import { startTestPodKubelet, type Service, type ServicePort, type TestPodKubelet } from "./test-pod-kubelet.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const real = realClusterFromEnv();
// On a real cluster: a namespace of our own, and single-namespace mode, so that nothing cluster-scoped but the CRDs
// (which Helm skips when present) meets another install.
const suffix = randomBytes(3).toString("hex");
const ns = real === undefined ? "mds-system" : `mds-e2e-${suffix}`;
const appNs = real === undefined ? "shop" : ns;
const clusterValues = real === undefined ? [] : ["--set", "singleNamespace=true", "--set", "deletionProtection.enabled=false", "--set", "replicas=0"];

let dir: string;
let devkube: Devkube | undefined;
let kubeconfigPath: string;
let service: TestService;
let runtime: OperatorRuntime | undefined;
let operatorKube: KubeConfig | undefined;
let kubelet: TestPodKubelet | undefined;
// On devkube, which runs no pods: the chart's conversion webhook as a process, as its ServiceAccount.
let webhookAt: Awaited<ReturnType<typeof serviceWebhook>> | undefined;
let webhook: WebhookProcess | undefined;
const logs: string[] = [];

const contextArgs = (flag: string) => (real?.context === undefined ? [] : [flag, real.context]);
const k = async (args: string[]) => {
  const r = await kubectl([...contextArgs("--context"), ...args], { kubeconfig: kubeconfigPath });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr.trim()}`);
  return r.stdout;
};
const h = (args: string[]) => helm([...contextArgs("--kube-context"), ...args], { kubeconfig: kubeconfigPath });
const getJson = async <T>(args: string[]) => JSON.parse(await k([...args, "-o", "json"])) as T;

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
}
const installed = async () => [await getJson<Obj>(["-n", ns, "get", "deployment", "mds-operator"]), await getJson<Obj>(["-n", ns, "get", "configmap", "mds-operator-config"])];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mds-chart-install-"));
  if (real === undefined) {
    webhookAt = await serviceWebhook(ns);
    devkube = await startDevkube({ dir: join(dir, "kube"), services: webhookAt.services, workloadControllers: false });
    kubeconfigPath = devkube.kubeconfigPath;
  } else kubeconfigPath = real.kubeconfigPath;
  service = await startTestService();
  await k(["create", "namespace", ns]);
  if (real !== undefined) await k(["label", "namespace", ns, "app.kubernetes.io/created-by=mds-e2e"]);
  if (appNs !== ns) await k(["create", "namespace", appNs]);
  // The token as docs/install.md says: kubectl create secret, never a manifest.
  await k(["-n", ns, "create", "secret", "generic", "mds-credentials", `--from-literal=token=${service.token}`]);
}, 120_000);

afterAll(async () => {
  await kubelet?.stop();
  await runtime?.stop();
  await operatorKube?.close();
  if (real !== undefined && !real.keepNamespaces) await kubectl([...contextArgs("--context"), "delete", "namespace", ns, "--wait=false"], { kubeconfig: kubeconfigPath });
  await webhook?.stop();
  await Promise.all([devkube?.stop(), service?.stop()]);
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

/** The admin's kubeconfig for the cluster in use, its user replaced by the ServiceAccount's token. */
async function kubeconfigOf(serviceAccount: string): Promise<string> {
  const token = (await k(["-n", ns, "create", "token", serviceAccount, "--duration=1h"])).trim();
  const own = parse(await k(["config", "view", "--minify", "--flatten", "--raw"])) as { users: { user: unknown }[] };
  for (const user of own.users) user.user = { token };
  return stringify(own);
}

async function startOperator(): Promise<void> {
  const { args, env } = containerOptions(await installed(), ns, "mds-operator-0");
  // Only the poll interval and the metrics address (a free port of this machine) differ from what the pods would get.
  const config = parseOperatorConfig([...args.filter((a) => !a.startsWith("--metrics-address")), "--metrics-address=127.0.0.1:0"], { ...env, MDS_POLL_FAST: "200ms" });
  if (config === "help") throw new Error("unexpected help");
  operatorKube = parseKubeConfig(await kubeconfigOf("mds-operator"));
  runtime = await startOperatorRuntime(config, {
    kubeConfig: operatorKube,
    logger: pino({ level: "info" }, new Writable({ write: (chunk: Buffer, _e, cb) => (logs.push(chunk.toString()), cb()) })),
    createOperator: createOperatorWithKinds,
    identity: "mds-operator-0",
  });
}

it("helm install --dry-run=server is accepted and creates nothing", async () => {
  const dryRun = await h(["install", "mds", chartDir, "-n", ns, "--dry-run=server", "--set", `config.apiUrl=${service.url}`, ...clusterValues]);
  expect({ code: dryRun.code, stderr: dryRun.stderr }).toEqual({ code: 0, stderr: "" });
  expect(dryRun.stdout).toContain("STATUS: pending-install");
  expect(await k(["-n", ns, "get", "deployments,configmaps,secrets", "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name"])).toBe("");
  expect((await h(["list", "-n", ns, "-q"])).stdout.trim()).toBe("");
});

it("helm install, then kubectl apply -f examples/, gives a DATABASE_URL that connects", async () => {
  const install = await h([
    "install", "mds", chartDir, "-n", ns,
    "--set", `config.apiUrl=${service.url}`,
    "--set", `credentials.fallbackNamespaces={${appNs}}`,
    ...clusterValues,
  ]);
  expect({ code: install.code, stderr: install.stderr }).toEqual({ code: 0, stderr: "" });
  expect(install.stdout).toContain("STATUS: deployed");
  expect(install.stdout).toContain(`kubectl -n ${ns} create secret generic mds-credentials`);
  expect(install.stdout).not.toContain(service.token);
  // Helm created the CRDs from crds/ and the objects of the templates.
  expect((await k(["get", "crd", "-o", "name"])).split("\n").filter((l) => l.endsWith(".mds.dev"))).toHaveLength(6);
  await k(["-n", ns, "get", "serviceaccount/mds-operator", "deployment/mds-operator", "configmap/mds-operator-config", "service/mds-operator-metrics"]);

  await k(["-n", ns, "get", "serviceaccount/mds-webhook", "deployment/mds-webhook", "service/mds-webhook"]);
  if (webhookAt !== undefined) {
    const webhookKubeconfig = join(dir, "webhook-kubeconfig");
    await writeFile(webhookKubeconfig, await kubeconfigOf("mds-webhook"));
    webhook = await webhookAt.start(webhookKubeconfig);
  }

  await startOperator();
  await k(["apply", "-n", appNs, "-f", join(repoRoot, "examples")]);
  await k(["wait", "-n", appNs, "--for=condition=Ready", "databases.mds.dev/orders", "--timeout=120s"]);
  const secret = await getJson<{ data: Record<string, string> }>(["-n", appNs, "get", "secret", "orders-db"]);
  const url = Buffer.from(secret.data["DATABASE_URL"] ?? "", "base64").toString();
  expect(url).toMatch(/^postgres(ql)?:\/\//);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    expect((await client.query<{ one: number }>("select 1 as one")).rows).toEqual([{ one: 1 }]);
  } finally {
    await client.end();
  }
  expect(logs.join("")).not.toContain(service.token);
}, 240_000);

/**
 * The Service's endpoint as kube-proxy would find it: the pods its selector matches (the Deployment's template, run
 * in this process) on the container port its targetPort names; none while the operator does not run.
 */
async function operatorEndpoint(service: Service, port: ServicePort): Promise<{ host: string; port: number } | undefined> {
  const deployment = await getJson<{ spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: { ports?: { name?: string; containerPort: number }[] }[] } } } }>(["-n", ns, "get", "deployment", "mds-operator"]);
  const labels = deployment.spec.template.metadata.labels;
  const selected = Object.entries(service.spec.selector ?? {}).every(([key, value]) => labels[key] === value);
  const ports = deployment.spec.template.spec.containers.flatMap((c) => c.ports ?? []);
  const served = ports.some((p) => p.name === port.targetPort || p.containerPort === port.targetPort);
  if (!selected || !served || runtime?.healthUrl === undefined) return undefined;
  const url = new URL(runtime.healthUrl);
  return { host: url.hostname, port: Number(url.port) };
}

const helmTestName = "helm test: the hook pod reaches the operator's /readyz through its Service";
const onDevkube = real === undefined ? it : it.skip;
onDevkube(`${helmTestName}${real === undefined ? "" : " [skipped on a real cluster: the pod needs the image in a registry and running operator pods]"}`, async () => {
  kubelet = await startTestPodKubelet({ kubeConfig: parseKubeConfig(await readFile(kubeconfigPath, "utf8")), namespace: ns, endpoint: operatorEndpoint });
  const result = await h(["test", "mds", "-n", ns, "--timeout", "2m"]);
  expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
  expect(result.stdout).toMatch(/TEST SUITE:\s+mds-operator-test-ready[\s\S]*Phase:\s+Succeeded/);
  expect(kubelet.runs).toEqual([{ name: "mds-operator-test-ready", exitCode: 0, output: expect.stringMatching(new RegExp(`^http://mds-operator-metrics\\.${ns}\\.svc:8080/readyz: 200 ok`)) }]);
  // hook-succeeded: helm deleted the pod.
  expect(await k(["-n", ns, "get", "pods", "-o", "name"])).toBe("");

  // With the operator stopped (no endpoint behind the Service), the same test fails and its pod stays for
  // kubectl describe; the operator then starts again for the tests after this one.
  await runtime?.stop();
  runtime = undefined;
  await operatorKube?.close();
  const failed = await h(["test", "mds", "-n", ns, "--timeout", "2m"]);
  expect(failed.code).not.toBe(0);
  expect(failed.stderr).toContain("mds-operator-test-ready");
  expect(kubelet.runs[1]?.exitCode).toBe(1);
  expect((await getJson<{ status: { phase: string } }>(["-n", ns, "get", "pod", "mds-operator-test-ready"])).status.phase).toBe("Failed");
  await kubelet.stop();
  kubelet = undefined;
  await k(["-n", ns, "delete", "pod", "mds-operator-test-ready"]);
  await startOperator();
}, 240_000);

it("helm upgrade to a changed value changes the options and rolls the pods; helm rollback restores both", async () => {
  const [before, beforeConfig] = await installed();
  const checksum = (d: Obj | undefined) => (d as unknown as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata.annotations["checksum/config"];
  const upgrade = await h(["upgrade", "mds", chartDir, "-n", ns, "--reuse-values", "--set", "config.logLevel=debug"]);
  expect({ code: upgrade.code, stderr: upgrade.stderr }).toEqual({ code: 0, stderr: "" });
  const [after, afterConfig] = await installed();
  expect([beforeConfig?.data?.["MDS_LOG_LEVEL"], afterConfig?.data?.["MDS_LOG_LEVEL"]]).toEqual(["info", "debug"]);
  expect(checksum(after)).not.toBe(checksum(before));

  const rollback = await h(["rollback", "mds", "1", "-n", ns]);
  expect({ code: rollback.code, stderr: rollback.stderr }).toEqual({ code: 0, stderr: "" });
  const [rolledBack, rolledBackConfig] = await installed();
  expect(rolledBackConfig?.data?.["MDS_LOG_LEVEL"]).toBe("info");
  expect(checksum(rolledBack)).toBe(checksum(before));
  const history = await h(["history", "mds", "-n", ns, "-o", "json"]);
  expect((JSON.parse(history.stdout) as { revision: number; status: string }[]).map((r) => [r.revision, r.status])).toEqual([
    [1, "superseded"],
    [2, "superseded"],
    [3, "deployed"],
  ]);
}, 120_000);

it("helm uninstall removes what the chart made and keeps the CRDs (and so every resource's data)", async () => {
  // As docs/install.md says: the resources first, while the operator still runs (Retain keeps the databases).
  await k(["delete", "-n", appNs, "databases.mds.dev", "--all", "--timeout=120s"]);
  await k(["delete", "-n", appNs, "projects.mds.dev", "--all", "--timeout=120s"]);
  await runtime?.stop();
  runtime = undefined;
  const uninstall = await h(["uninstall", "mds", "-n", ns]);
  expect({ code: uninstall.code, stderr: uninstall.stderr }).toEqual({ code: 0, stderr: "" });
  const left = await k(["-n", ns, "get", "deployments,services,configmaps,roles,rolebindings,serviceaccounts,networkpolicies,poddisruptionbudgets", "-o", "name"]);
  // The namespace's own defaults stay (the default ServiceAccount and kube-root-ca.crt that the cluster puts in each).
  expect(left.split("\n").filter((l) => l !== "" && l !== "serviceaccount/default" && l !== "configmap/kube-root-ca.crt")).toEqual([]);
  if (real === undefined) expect(await k(["get", "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings", "-o", "name"])).not.toMatch(/mds-/);
  expect((await k(["get", "crd", "-o", "name"])).split("\n").filter((l) => l.endsWith(".mds.dev"))).toHaveLength(6);
  expect((await h(["list", "-n", ns, "-q"])).stdout.trim()).toBe("");
}, 240_000);
