import { randomBytes } from "node:crypto";
import { kindModules } from "../../src/resources/index.ts";
import { group } from "../../src/resources/group.ts";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { parse, parseAllDocuments, stringify } from "yaml";
import { pino, type Logger } from "pino";
import { describe, it } from "vitest";
import { Registry } from "prom-client";
import { startDevkube, type Devkube } from "@mds/devkube";
import { runKubectl } from "../support/kubectl.ts";
import { createKubeClient, type KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig, parseKubeConfig, type KubeConfig } from "../../src/kube/kubeconfig.ts";
import { createOperatorWithKinds, type RuntimeOperatorOptions } from "../../src/cli/operator.ts";
import type { Operator } from "../../src/operator/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import {
  startPublicApiEmulator,
  type EmulatorFaults,
  type PublicApiEmulator,
} from "../support/public-api-emulator/server.ts";
import { SecretType, type Secret } from "../../src/kube/types.ts";
import { formatFindings, scanKubernetes, scanText, type PlantedSecret } from "../support/secret-scan.ts";
import { connectionSecretValues } from "../support/chaos/invariants.ts";
import { KubeConfig as ClientNodeKubeConfig } from "@kubernetes/client-node";
import { eventually } from "../support/eventually.ts";
import { serviceWebhook, type WebhookProcess } from "../support/webhook-process.ts";

export { eventually };

// One devkube (or a namespace of a real cluster, docs/e2e.md) + one service per test file; operators are started and stopped per scenario as processes would be.

/**
 * Where the suite runs: devkube on this machine (default), or the cluster of `MDS_E2E_KUBECONFIG`
 * (docs/e2e.md). Read once here: tests are the one place besides src/cli that may look at the environment.
 */
export interface RealCluster {
  kubeconfigPath: string;
  /** A context other than the kubeconfig's current one. */
  context?: string | undefined;
  /** Keep the test namespace afterwards (debugging). */
  keepNamespaces?: boolean | undefined;
}

export function realClusterFromEnv(env: Record<string, string | undefined> = process.env): RealCluster | undefined {
  const kubeconfigPath = env["MDS_E2E_KUBECONFIG"];
  if (kubeconfigPath === undefined || kubeconfigPath === "") return undefined;
  return {
    kubeconfigPath,
    context: env["MDS_E2E_CONTEXT"] || undefined,
    keepNamespaces: env["MDS_E2E_KEEP_NAMESPACES"] === "1",
  };
}

const realCluster = realClusterFromEnv();
/** True when the suite runs against the cluster of MDS_E2E_KUBECONFIG instead of devkube. */
export const onRealCluster = realCluster !== undefined;

/**
 * A test that needs one of devkube's test hooks (`stack.devkube!.closeWatches()`, `setWatchHistoryLimit()` for
 * 410 Gone, its request log): an ordinary `it` on devkube, skipped on a real cluster with the reason in its name.
 * `why` names the hook, e.g. "closeWatches() to end every watch on demand".
 */
export function itNeedsDevkube(name: string, why: string, fn: () => Promise<void>, timeout?: number): void {
  if (onRealCluster) it.skip(`${name} [skipped on a real cluster: needs devkube's ${why}]`, () => {});
  else it(name, fn, timeout);
}

/**
 * A file that replaces the cluster-wide CRDs for a while (an older release's, a newer one's): on devkube every file
 * has its own cluster, but on a real one the other files running in parallel would work under those CRDs. There it
 * runs only when asked for, alone: MDS_E2E_CRD_TESTS=1 and --no-file-parallelism (docs/e2e.md).
 */
const crdTestsSkipped = onRealCluster && process.env["MDS_E2E_CRD_TESTS"] !== "1";
export const describeChangingCrds = crdTestsSkipped ? describe.skip : describe;
/** Appended to such a file's describe names: why it was skipped. */
export const changingCrdsNote = crdTestsSkipped
  ? " [skipped on a real cluster: it replaces the CRDs; run it alone with MDS_E2E_CRD_TESTS=1]"
  : "";

export interface Stack {
  /** The devkube of this file; undefined on a real cluster. */
  devkube: Devkube | undefined;
  /** The conversion webhook the CRDs name, run beside devkube; undefined on a real cluster (deploy/ runs it). */
  webhook: WebhookProcess | undefined;
  service: TestService;
  /** The public-API emulator the operator talks to, when the stack was started with `api: "emulator"`. */
  emulator: PublicApiEmulator | undefined;
  kubeConfig: KubeConfig;
  kube: KubeClient;
  /** Every namespaced object of the test lives here: "default" on devkube, `mds-e2e-<random>` on a real cluster. */
  namespace: string;
  /** Every namespace of the test: `namespace` first, then those asked for with `StackOptions.namespaces`. */
  namespaces: string[];
  /** The name of a namespace asked for with `StackOptions.namespaces` by its role (e.g. "apps"). */
  namespaceOf(role: string): string;
  /** Everything every operator of this stack logged, for the planted-secret scan. */
  logs: string[];
  /**
   * The planted-secret scan: the service token and every password and connection string in the namespace's
   * connection Secrets, looked for in every operator log line, Event, mds custom resource (status included) and
   * Secret's labels and annotations. One line per finding (naming the secret, never its value); "" when clean.
   */
  leaks(): Promise<string>;
  /**
   * kubectl against the stack's cluster, in `namespace` unless the command names its own (`-n`, `-A`) or every object
   * of its input does (`metadata.namespace`): see `namespaceFlagNeeded`.
   */
  kubectl(args: string[], input?: string): Promise<string>;
  /**
   * Applies a release's CRDs as the stack applied its own (client-side on devkube, server-side on a real cluster)
   * and drops kubectl's discovery cache: after CRDs change their versions, a cached preferred version may no longer
   * be served, and kubectl does not notice by itself.
   */
  applyCrds(crdsDir: string): Promise<void>;
  startOperator(overrides?: Partial<RuntimeOperatorOptions>): Promise<Operator>;
  stop(): Promise<void>;
}

export interface StackOptions {
  /** Use this cluster instead of starting devkube; defaults to MDS_E2E_KUBECONFIG and friends. */
  realCluster?: RealCluster | undefined;
  /**
   * The operator's counterpart: our service (default), or the public-API emulator in front of it (the public API's
   * status codes, nulls and foreign objects, no Idempotency-Key; test/support/public-api-emulator/).
   */
  api?: Counterpart;
  faults?: EmulatorFaults;
  /**
   * More namespaces the test needs besides `namespace`, by role (e.g. `["apps"]`): created (labelled
   * `app.kubernetes.io/created-by=mds-e2e`) before any operator starts, watched by every operator of the stack, and on
   * a real cluster removed at the end like the main one. Names come from `stack.namespaceOf(role)`: the role itself on
   * devkube, `<namespace>-<role>` on a real cluster, so test files running in parallel on one cluster never share one.
   */
  namespaces?: string[];
  /**
   * The CRDs to install instead of this tree's crds/ (an older release's, e.g. 0.1.0's, which serve v1alpha1 alone).
   * The conversion webhook runs all the same, waiting for CRDs that name it.
   */
  crdsDir?: string;
  /**
   * Run devkube's own kubelet (default true). false leaves pods scheduled but Pending, for a test harness to play the
   * kubelet as it must on a real cluster (test/support/harness-kubelet.ts). No effect on a real cluster.
   */
  devkubeKubelet?: boolean;
}

export type Counterpart = "service" | "emulator";
/** Every suite that proves an operator promise runs against both. */
export const counterparts: Counterpart[] = ["service", "emulator"];

const crdsDir = path.resolve(import.meta.dirname, "../../crds");
// Every kind of the registry, by its full resource name (a short name could be another CRD's on a real cluster).
const mdsKinds = kindModules.map((k) => `${k.definition.plural}.${group}`).join(",");
const createdBy = { "app.kubernetes.io/created-by": "mds-e2e" };

/**
 * Deletes the mds CRDs of the cluster that store objects in a version the CRDs in `crdsDir` lack, and every object of
 * theirs (finalizers dropped first: no operator is running to remove them), and waits until they are gone.
 */
async function removeCrdsStoringOtherVersions(
  kubectlIn: (ns: string | undefined, args: string[]) => Promise<string>,
  crdsDir: string,
): Promise<void> {
  const wanted = new Map<string, string[]>();
  for (const file of (await readdir(crdsDir)).filter((f) => f.endsWith(".yaml"))) {
    const crd = parse(await readFile(path.join(crdsDir, file), "utf8")) as Crd;
    wanted.set(
      crd.metadata.name,
      crd.spec.versions.map((v) => v.name),
    );
  }
  const current = JSON.parse(await kubectlIn(undefined, ["get", "crd", "-o", "json"])) as {
    items: (Crd & { status?: { storedVersions?: string[] } })[];
  };
  const doomed = current.items.filter((crd) => {
    const versions = wanted.get(crd.metadata.name);
    return versions !== undefined && (crd.status?.storedVersions ?? []).some((v) => !versions.includes(v));
  });
  if (doomed.length === 0) return;
  const dropFinalizers = JSON.stringify({ metadata: { finalizers: null } });
  for (const crd of doomed) {
    const objects = JSON.parse(await kubectlIn(undefined, ["get", crd.metadata.name, "-A", "-o", "json"])) as {
      items: { metadata: { name: string; namespace?: string } }[];
    };
    for (const { metadata } of objects.items)
      await kubectlIn(metadata.namespace, [
        "patch",
        crd.metadata.name,
        metadata.name,
        "--type=merge",
        "-p",
        dropFinalizers,
      ]).catch(() => {});
  }
  await kubectlIn(undefined, ["delete", "crd", ...doomed.map((c) => c.metadata.name), "--wait=true", "--timeout=120s"]);
}

interface Crd {
  metadata: { name: string };
  spec: { versions: { name: string }[] };
}

/**
 * Whether `stack.kubectl` adds `--namespace=<stack.namespace>` on a real cluster. Not when the command names its
 * namespace (`-n`, `--namespace`, `-A`, `--all-namespaces`), nor when its input names one in every object: kubectl
 * refuses an object whose namespace differs from the flag's, so forcing it would break every manifest for the
 * test's other namespaces.
 */
export function namespaceFlagNeeded(args: string[], input?: string): boolean {
  const namesItsOwn = args.some(
    (a) =>
      a === "-A" ||
      /^--all-namespaces(=true)?$/.test(a) ||
      a === "-n" ||
      /^-n./.test(a) ||
      a === "--namespace" ||
      a.startsWith("--namespace="),
  );
  if (namesItsOwn) return false;
  if (input === undefined) return true;
  const objects: unknown[] = [];
  try {
    for (const doc of parseAllDocuments(input)) {
      if (doc.errors.length > 0) return true;
      const obj = doc.toJS() as { items?: unknown } | null;
      if (obj === null || obj === undefined) continue;
      // A List (`kubectl get -o json` fed back) carries its objects in items.
      objects.push(...(Array.isArray(obj.items) ? obj.items : [obj]));
    }
  } catch {
    return true;
  }
  const namespaceOf = (o: unknown) => (o as { metadata?: { namespace?: unknown } } | null)?.metadata?.namespace;
  return objects.length === 0 || objects.some((o) => typeof namespaceOf(o) !== "string" || namespaceOf(o) === "");
}

function loadRealCluster(real: RealCluster): KubeConfig {
  try {
    return loadKubeConfig({ kubeconfig: real.kubeconfigPath, context: real.context, env: process.env });
  } catch (err) {
    const context = real.context === undefined ? "" : ` (MDS_E2E_CONTEXT "${real.context}")`;
    throw new Error(
      `cannot run the e2e suite on MDS_E2E_KUBECONFIG "${real.kubeconfigPath}"${context}: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const real = "realCluster" in options ? options.realCluster : realCluster;
  const roles = options.namespaces ?? [];
  for (const role of roles) {
    // A DNS label short enough to follow `mds-e2e-<8 hex>-`, and no namespace asked for twice.
    if (!/^[a-z0-9]([-a-z0-9]{0,37}[a-z0-9])?$/.test(role) || roles.indexOf(role) !== roles.lastIndexOf(role)) {
      throw new Error(`startStack: namespace role "${role}" must be a distinct DNS label of at most 39 characters`);
    }
  }
  // Loaded first: a wrong path or context fails here, before anything is started.
  const realKubeConfig = real === undefined ? undefined : loadRealCluster(real);
  const dir = await mkdtemp(path.join(tmpdir(), "mds-e2e-"));
  // Both at once; when either (or the emulator after them) fails to start, what did start is stopped before the
  // error is thrown: nothing the caller never got a handle on may outlive the test.
  // On devkube the conversion webhook runs as a process behind the Service crds/ names; a real cluster runs the
  // Deployment of deploy/ (docs/e2e.md).
  const webhookAt = real === undefined ? await serviceWebhook() : undefined;
  let webhook: WebhookProcess | undefined;
  const [devkubeStart, serviceStart] = await Promise.allSettled([
    real === undefined
      ? startDevkube({
          dir: path.join(dir, "kube"),
          port: 0,
          services: webhookAt!.services,
          pods: { kubelet: options.devkubeKubelet ?? true },
        })
      : Promise.resolve(undefined),
    startTestService(),
  ]);
  const stopStarted = async () => {
    await webhook?.stop().catch(() => {});
    if (devkubeStart.status === "fulfilled") await devkubeStart.value?.stop().catch(() => {});
    if (serviceStart.status === "fulfilled") await serviceStart.value.stop().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  };
  if (devkubeStart.status === "rejected" || serviceStart.status === "rejected") {
    await stopStarted();
    throw devkubeStart.status === "rejected" ? devkubeStart.reason : (serviceStart as PromiseRejectedResult).reason;
  }
  const devkube = devkubeStart.value;
  const service = serviceStart.value;
  let emulator: Awaited<ReturnType<typeof startPublicApiEmulator>> | undefined;
  try {
    emulator =
      options.api === "emulator"
        ? await startPublicApiEmulator({ upstream: service.url, ...(options.faults ? { faults: options.faults } : {}) })
        : undefined;
  } catch (err) {
    await stopStarted();
    throw err;
  }
  // The operator's own loader, as \`mds operator\` uses it; the tests drive the cluster "as a user" through kubectl.
  const kubeConfig = realKubeConfig ?? parseKubeConfig(devkube!.kubeconfig);
  const kubeconfigPath = devkube?.kubeconfigPath ?? real!.kubeconfigPath;
  const contextArgs = real?.context === undefined ? [] : [`--context=${real.context}`];
  const namespace = real === undefined ? "default" : `mds-e2e-${randomBytes(4).toString("hex")}`;
  const extraNamespaces = new Map(roles.map((role) => [role, real === undefined ? role : `${namespace}-${role}`]));
  const namespaces = [namespace, ...extraNamespaces.values()];
  const kube = createKubeClient(kubeConfig);
  const logs: string[] = [];
  const operators: Operator[] = [];
  const cacheDir = path.join(dir, "kubectl-cache");

  async function kubectlIn(ns: string | undefined, args: string[], input?: string): Promise<string> {
    const full = [...contextArgs, ...(ns === undefined ? [] : [`--namespace=${ns}`]), ...args];
    const r = await runKubectl(kubeconfigPath, full, { ...(input === undefined ? {} : { input }), cacheDir });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed: ${r.stderr.trim()}`);
    return r.stdout;
  }
  const kubectl = (args: string[], input?: string) =>
    kubectlIn(real !== undefined && namespaceFlagNeeded(args, input) ? namespace : undefined, args, input);
  async function applyCrds(crds: string): Promise<void> {
    await kubectl(
      real === undefined
        ? ["apply", "-f", crds]
        : ["apply", "--server-side", "--field-manager=mds-e2e", "--force-conflicts", "-f", crds],
    );
    await rm(cacheDir, { recursive: true, force: true });
  }

  async function removeNamespace(ns: string): Promise<void> {
    // The operators are gone, so nothing would remove the finalizers (the mds resources' and the credentials
    // Secrets' mds.dev/credentials-in-use) and the namespace would stay Terminating; the remote side (the local
    // service) goes away with this stack, so dropping them loses nothing. A namespace the test deleted itself is
    // simply not found.
    const dropFinalizers = JSON.stringify({ metadata: { finalizers: null } });
    const names = (await kubectlIn(ns, ["get", mdsKinds, "-o", "name"])).split("\n").filter((n) => n !== "");
    for (const name of names)
      await kubectlIn(ns, ["patch", name, "--type=merge", "-p", dropFinalizers]).catch(() => {});
    const secrets = JSON.parse(await kubectlIn(ns, ["get", "secrets", "-o", "json"])) as { items: Secret[] };
    for (const s of secrets.items.filter((x) => (x.metadata.finalizers ?? []).length > 0)) {
      await kubectlIn(ns, ["patch", "secret", s.metadata.name, "--type=merge", "-p", dropFinalizers]).catch(() => {});
    }
    await kubectlIn(undefined, ["delete", "namespace", ns, "--wait=false", "--ignore-not-found"]);
  }
  async function removeNamespaces(created: string[]): Promise<void> {
    const failures = (await Promise.allSettled(created.map(removeNamespace))).filter((r) => r.status === "rejected");
    if (failures.length > 0)
      throw new AggregateError(
        failures.map((f) => f.reason),
        `cannot remove the test namespaces ${created.join(", ")}`,
      );
  }

  const created: string[] = [];
  try {
    const crds = options.crdsDir ?? crdsDir;
    if (real === undefined) {
      await kubectl(["apply", "-f", crds]);
      await kubectl(["create", "namespace", "mds-system"]);
      webhook = await webhookAt!.start(kubeconfigPath, { caBundles: options.crdsDir === undefined });
    } else {
      // Another release's CRDs (the CRD-replacing files, MDS_E2E_CRD_TESTS=1): a cluster's CRDs that stored objects
      // in a version those lack cannot become them (the API server keeps a stored version in spec.versions), so
      // they go first, with every object of theirs: the cluster is the test's, as docs/e2e.md says.
      if (options.crdsDir !== undefined) await removeCrdsStoringOtherVersions(kubectlIn, crds);
      // Server-side, under our own field manager: a no-op when the cluster already has these CRDs; never deleted.
      await applyCrds(crds);
    }
    // On devkube "default" exists already; on a real cluster every namespace of the test is its own.
    for (const ns of real === undefined ? namespaces.slice(1) : namespaces) {
      await kubectlIn(
        undefined,
        ["create", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: createdBy } }),
      );
      created.push(ns);
    }
    // kubectl caches discovery: make it see the new CRDs before the first apply of a custom resource.
    await eventually(() => kubectl(["get", mdsKinds]), { what: "CRDs served" });
    // `create`, not client-side `apply`: apply would copy the token into the last-applied-configuration annotation,
    // where anyone who can read Secrets' metadata sees it (the planted-secret scan found exactly that).
    await kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace },
        stringData: { token: service.token },
      }),
    );
  } catch (err) {
    // A half-started stack leaves nothing behind: no namespace on the cluster, no servers in the test process.
    if (real !== undefined && !real.keepNamespaces) await removeNamespaces(created).catch(() => {});
    await Promise.all([webhook?.stop(), devkube?.stop(), service.stop(), emulator?.stop()]).catch(() => {});
    await rm(dir, { recursive: true, force: true });
    throw err;
  }

  return {
    devkube,
    webhook,
    service,
    emulator,
    kubeConfig,
    kube,
    namespace,
    namespaces,
    namespaceOf(role) {
      const name = extraNamespaces.get(role);
      if (name === undefined)
        throw new Error(
          `no namespace for role "${role}": ask for it with startStack({ namespaces: [${JSON.stringify(role)}] })`,
        );
      return name;
    },
    logs,
    kubectl,
    applyCrds,
    async leaks() {
      const planted: PlantedSecret[] = [
        { name: "service token", value: service.token },
        ...(
          await Promise.all(
            namespaces.map(async (ns) =>
              connectionSecretValues((await kube.list<Secret>(SecretType, { namespace: ns })).items),
            ),
          )
        ).flat(),
      ];
      const kc = new ClientNodeKubeConfig();
      kc.loadFromFile(kubeconfigPath);
      if (real?.context !== undefined) kc.setCurrentContext(real.context);
      const findings = [...scanText(logs.join(""), planted, "operator logs"), ...(await scanKubernetes(kc, planted))];
      return formatFindings(findings);
    },
    async startOperator(overrides = {}) {
      const sink = new Writable({
        write(chunk: Buffer, _enc, cb) {
          logs.push(chunk.toString());
          cb();
        },
      });
      const logger: Logger = pino({ level: "debug" }, sink);
      const operator = createOperatorWithKinds({
        kubeConfig,
        apiUrl: emulator?.url ?? service.url,
        defaultCredentials: { secretNamespace: namespace, secretName: "mds-credentials", key: "token" },
        // On a shared cluster other test files run their own operators and services: each watches only its namespaces.
        namespaces: real === undefined ? undefined : namespaces,
        instanceId: "e2e",
        concurrency: 4,
        pollIntervals: { fastMs: 200, slowMs: 30_000 },
        logger,
        metrics: new Registry(),
        canWrite: () => true,
        ...overrides,
      });
      operators.push(operator);
      await operator.start();
      return operator;
    },
    async stop() {
      await Promise.all(operators.map((o) => o.stop().catch(() => {})));
      try {
        if (real !== undefined && !real.keepNamespaces) await removeNamespaces(namespaces);
      } finally {
        await Promise.all([webhook?.stop(), devkube?.stop(), service.stop(), emulator?.stop()]);
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Several objects as one multi-document YAML stream for `kubectl apply -f -`. */
export function manifests(...objs: object[]): string {
  return objs.map((o) => stringify(o)).join("---\n");
}
