import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  ApiException,
  CoreV1Api,
  KubeConfig,
  loadAllYaml,
  loadYaml,
  type V1CustomResourceDefinition,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from "@kubernetes/client-node";
import pino, { type Logger } from "pino";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import {
  startEmbeddedService,
  type EmbeddedService,
  type EmbeddedServiceOptions,
} from "../src/service/embedded/stack.ts";
import { crdDefinitions, renderCrdFiles, webhookService } from "../src/resources/crd-files.ts";

// The whole local stack, once: PostgreSQL and the embedded service, devkube with the CRDs (rendered from
// src/resources, as `mds crds` writes them) and the conversion webhook they name (`mds webhook`, behind the Service
// mds-system/mds-webhook, which devkube maps to its port), the credentials Secret, and operator child processes started the way
// `mds operator` runs in a cluster. `mds dev` (dev-stack.ts) adds its state directory, fixed ports, env files and
// one supervised operator; the chaos harness and the operator benchmarks (test/support/chaos/stack.ts) add their
// fault proxy, public-API emulator and TCP proxy through the `api` and `kube` seams.

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
export const credentialsSecret = { namespace: "mds-system", name: "mds-credentials", key: "token" };

/** Something put between the operator and a part of the stack (a proxy): the URL the operator gets instead. */
interface Seam {
  url: string;
  stop(): Promise<void>;
}

interface StackOptions {
  /** Parts keep their state under it: service/, devkube/. */
  dir: string;
  /** The operator's --instance-id. */
  instanceId: string;
  /** Progress lines for the terminal (never secrets). */
  say?: (line: string) => void;
  /** For startEmbeddedService; the logger defaults to <dir>/service.log at info. */
  service?: Omit<EmbeddedServiceOptions, "dir">;
  /** devkube's port (default: a free one) and logger (default: <dir>/devkube.log at info). */
  devkube?: { port?: number; logger?: Logger };
  /** Started after the service, given its URL: what the operator talks to instead (a fault proxy, an emulator). */
  api?: (serviceUrl: string) => Promise<Seam>;
  /** Started after devkube, given its URL: the operator's kubeconfig points at it instead (a TCP proxy). */
  kube?: (devkubeUrl: string) => Promise<Seam>;
  /**
   * The operator's --credentials-fallback-namespaces: the namespaces that may use the stack's token without a
   * mds-credentials Secret of their own. Default "*": the chaos harness and the benchmarks are one program's
   * namespaces. `mds dev` lends it to "default" only (dev-stack.ts says why).
   */
  fallbackNamespaces?: string;
}

export interface OperatorProcess {
  identity: string;
  pid: number;
  logFile: string;
  /** True once kill() sent a signal (an exit by SIGKILL is then not the operator's own). */
  signalled: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  alive(): boolean;
  kill(signal: NodeJS.Signals): Promise<void>;
}

interface StartOperatorOptions {
  identity: string;
  /** Appended to its output. */
  logFile: string;
  /** Flags after the stack's own (kubeconfig, API URL, credentials Secret, instance id, identity). */
  args?: string[];
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** Its own process group: a terminal's Ctrl-C then reaches only the parent, which stops the parts in order. */
  detached?: boolean;
  /** The `mds` entry script to run (default bin/mds.js, the sources; benchmarks give the image's, over dist/). */
  entry?: string;
}

interface Supervisor {
  pid(): number | undefined;
  /** Resolves after the next (re)start. */
  nextStart(): Promise<number>;
  stop(): Promise<void>;
}

interface SuperviseOptions {
  identity: string;
  logFile: string;
  /** Holds the current child's pid while it runs. */
  pidFile: string;
  args?: string[];
  /** Restart delay after a crash; doubles up to 30 s while it keeps crashing, resets after a minute of uptime. */
  restartDelayMs: number;
  say?: (line: string) => void;
}

export interface Stack {
  dir: string;
  instanceId: string;
  service: EmbeddedService;
  devkube: Devkube;
  /** Names of the CRDs installed. */
  crds: string[];
  /** What operators are given: the API seam's URL, or the service's. */
  operatorApiUrl: string;
  /** What operators are given: devkube's kubeconfig, or one through the kube seam. */
  operatorKubeconfigPath: string;
  /** One `mds operator` child process, not restarted. */
  startOperator(options: StartOperatorOptions): OperatorProcess;
  /** One `mds operator` child kept running as a Deployment would (restarted whenever it exits). */
  superviseOperator(options: SuperviseOptions): Supervisor;
  /** Stops whatever the stack started, in reverse order (operators first). */
  stop(): Promise<void>;
}

function status(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

// Only the status: client-node errors can carry request headers with the bearer token.
function errorText(err: unknown): string {
  if (err instanceof ApiException) return `HTTP ${err.code}`;
  return err instanceof Error ? err.message : String(err);
}

export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${errorText(last)}` : ""}`);
}

function fileLogger(file: string, level = "info"): Logger {
  return pino({ level }, pino.destination({ dest: file, append: true, mkdir: true, sync: false }));
}

async function applyCrds(kc: KubeConfig): Promise<string[]> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const names: string[] = [];
  for (const text of renderCrdFiles().values()) {
    // loadYaml maps the YAML onto client-node's models; a plain parse would lose every x-kubernetes-* key
    // (CEL rules, preserve-unknown-fields) in serialisation.
    const crd = loadYaml<V1CustomResourceDefinition>(text);
    const name = crd.metadata?.name ?? "";
    names.push(name);
    try {
      const current = await api.readCustomResourceDefinition({ name });
      await api.replaceCustomResourceDefinition({
        name,
        body: { ...crd, metadata: { ...crd.metadata, name, resourceVersion: current.metadata?.resourceVersion ?? "" } },
      });
    } catch (err) {
      if (status(err) !== 404) throw new Error(`cannot install CRD ${name}: ${errorText(err)}`);
      await api.createCustomResourceDefinition({ body: crd });
    }
  }
  for (const name of names) {
    await until(async () => {
      const crd = await api.readCustomResourceDefinition({ name });
      return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True") ?? false;
    }, `CRD ${name} to be established`);
  }
  return names;
}

/** deploy/base's deletion-protection policy: the same file a cluster install applies, so the local stack enforces it too. */
const deletionProtectionPolicyFile = path.join(repoRoot, "deploy/base/deletion-protection.yaml");

/**
 * Installs (or updates) the ValidatingAdmissionPolicy and its binding from deploy/base, which devkube evaluates as a
 * real API server does: without it `kubectl delete` of a Database with `deletionProtection: true` would simply delete
 * it locally, while an install refuses it.
 */
export async function applyDeletionProtectionPolicy(kc: KubeConfig): Promise<string> {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const [policy, binding] = loadAllYaml(readFileSync(deletionProtectionPolicyFile, "utf8")) as [
    V1ValidatingAdmissionPolicy,
    V1ValidatingAdmissionPolicyBinding,
  ];
  const name = policy.metadata?.name ?? "";
  await createOrReplace(
    `ValidatingAdmissionPolicy ${name}`,
    async () => {
      const current = await api.readValidatingAdmissionPolicy({ name });
      await api.replaceValidatingAdmissionPolicy({
        name,
        body: { ...policy, metadata: { ...policy.metadata, resourceVersion: current.metadata?.resourceVersion ?? "" } },
      });
    },
    () => api.createValidatingAdmissionPolicy({ body: policy }),
  );
  const bindingName = binding.metadata?.name ?? "";
  await createOrReplace(
    `ValidatingAdmissionPolicyBinding ${bindingName}`,
    async () => {
      const current = await api.readValidatingAdmissionPolicyBinding({ name: bindingName });
      await api.replaceValidatingAdmissionPolicyBinding({
        name: bindingName,
        body: {
          ...binding,
          metadata: { ...binding.metadata, resourceVersion: current.metadata?.resourceVersion ?? "" },
        },
      });
    },
    () => api.createValidatingAdmissionPolicyBinding({ body: binding }),
  );
  return name;
}

/** Replace when it exists (a restarted stack), create on 404. */
async function createOrReplace(
  what: string,
  replace: () => Promise<unknown>,
  create: () => Promise<unknown>,
): Promise<void> {
  try {
    await replace();
  } catch (err) {
    if (status(err) !== 404) throw new Error(`cannot install ${what}: ${errorText(err)}`);
    await create();
  }
}

async function applyCredentials(kc: KubeConfig, token: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name: credentialsSecret.namespace } } });
  } catch (err) {
    if (status(err) !== 409)
      throw new Error(`cannot create namespace ${credentialsSecret.namespace}: ${errorText(err)}`);
  }
  const body = {
    metadata: {
      name: credentialsSecret.name,
      namespace: credentialsSecret.namespace,
      labels: { "app.kubernetes.io/part-of": "mds" },
    },
    type: "Opaque",
    stringData: { [credentialsSecret.key]: token },
  };
  try {
    await core.createNamespacedSecret({ namespace: credentialsSecret.namespace, body });
  } catch (err) {
    if (status(err) !== 409) throw new Error(`cannot write the credentials Secret: ${errorText(err)}`);
    await core.replaceNamespacedSecret({ name: credentialsSecret.name, namespace: credentialsSecret.namespace, body });
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * `mds webhook` as deploy/ runs it, as its own process (devkube must not host it on its own thread), behind the
 * Service the CRDs name. Resolves once every mds.dev CRD carries its caBundle: from then on both versions are served.
 */
async function startWebhook(
  kc: KubeConfig,
  kubeconfigPath: string,
  port: number,
  logFile: string,
): Promise<{ stop(): Promise<void> }> {
  const fd = openSync(logFile, "a");
  const args = ["webhook", "--service", webhookService.name, "--namespace", webhookService.namespace];
  const child = spawn(
    process.execPath,
    [
      path.join(repoRoot, "bin/mds.js"),
      ...args,
      "--kubeconfig",
      kubeconfigPath,
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
    ],
    { stdio: ["ignore", fd, fd], cwd: repoRoot },
  );
  closeSync(fd);
  let exited = false;
  const done = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));
  const stop = async () => {
    if (exited) return;
    child.kill("SIGTERM");
    await done;
  };
  try {
    const api = kc.makeApiClient(ApiextensionsV1Api);
    await until(async () => {
      if (exited) throw new Error(`mds webhook exited (log ${logFile})`);
      for (const def of crdDefinitions) {
        const crd = await api.readCustomResourceDefinition({ name: `${def.plural}.mds.dev` });
        if (!crd.spec.conversion?.webhook?.clientConfig?.caBundle) return false;
      }
      return true;
    }, "the conversion webhook to inject its CA into the CRDs");
  } catch (err) {
    await stop();
    throw err;
  }
  return { stop };
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const dir = path.resolve(options.dir);
  const say = options.say ?? (() => undefined);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const cleanups: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
    cleanups.length = 0;
  };

  try {
    say(`PostgreSQL and service starting (state in ${path.join(dir, "service")})`);
    const serviceLog = path.join(dir, "service.log");
    // A laptop's stack keeps 4 spare databases (30 MB), not the service's 64 sized for bursts of creates.
    const service = await startEmbeddedService({
      logger: fileLogger(serviceLog),
      ...options.service,
      service: { spareDatabases: 4, ...options.service?.service },
      dir: path.join(dir, "service"),
    });
    cleanups.push(() => service.stop());
    say(`service         ${service.url} (PostgreSQL on port ${service.postgres.port}, log ${serviceLog})`);
    const api = options.api ? await options.api(service.url) : undefined;
    if (api) cleanups.push(() => api.stop());

    const webhookPort = await freePort();
    const devkube = await startDevkube({
      dir: path.join(dir, "devkube"),
      services: { [`${webhookService.namespace}/${webhookService.name}`]: `127.0.0.1:${webhookPort}` },
      logger: options.devkube?.logger ?? fileLogger(path.join(dir, "devkube.log")),
      ...(options.devkube?.port === undefined ? {} : { port: options.devkube.port }),
    });
    cleanups.push(() => devkube.stop());
    let operatorKubeconfigPath = devkube.kubeconfigPath;
    const kubeSeam = options.kube ? await options.kube(devkube.url) : undefined;
    if (kubeSeam) {
      cleanups.push(() => kubeSeam.stop());
      const kubeconfig = parseYaml(devkube.kubeconfig) as { clusters: Array<{ cluster: { server: string } }> };
      for (const c of kubeconfig.clusters) c.cluster.server = kubeSeam.url;
      operatorKubeconfigPath = path.join(dir, "operator.kubeconfig");
      await writeFile(operatorKubeconfigPath, toYaml(kubeconfig), { mode: 0o600 });
    }
    const kc = new KubeConfig();
    kc.loadFromString(devkube.kubeconfig);
    const crds = await applyCrds(kc);
    say(`devkube         ${devkube.url} (CRDs installed: ${crds.join(", ")})`);
    const policy = await applyDeletionProtectionPolicy(kc);
    say(
      `admission       ValidatingAdmissionPolicy ${policy} (deletionProtection enforced, as deploy/base installs it)`,
    );
    await applyCredentials(kc, service.token);
    say(`credentials     Secret ${credentialsSecret.namespace}/${credentialsSecret.name}`);
    const webhookLog = path.join(dir, "webhook.log");
    const webhook = await startWebhook(kc, devkube.kubeconfigPath, webhookPort, webhookLog);
    cleanups.push(() => webhook.stop());
    say(
      `webhook         mds webhook on 127.0.0.1:${webhookPort} as Service ${webhookService.namespace}/${webhookService.name}: v1beta1 stored, v1alpha1 served converted (log ${webhookLog})`,
    );

    const operatorApiUrl = api?.url ?? service.url;
    const processes = new Set<OperatorProcess>();
    cleanups.push(async () => {
      for (const p of processes) if (p.alive()) await p.kill("SIGKILL");
    });

    const startOperator = (o: StartOperatorOptions): OperatorProcess => {
      const fd = openSync(o.logFile, "a");
      const args = [
        o.entry ?? path.join(repoRoot, "bin/mds.js"),
        "operator",
        "--kubeconfig",
        operatorKubeconfigPath,
        "--api-url",
        operatorApiUrl,
        "--credentials-secret",
        `${credentialsSecret.namespace}/${credentialsSecret.name}`,
        // Which namespaces may use the stack's token without one of their own (docs/many-teams.md).
        "--credentials-fallback-namespaces",
        options.fallbackNamespaces ?? "*",
        "--instance-id",
        options.instanceId,
        "--identity",
        o.identity,
        ...(o.args ?? []),
      ];
      const child = spawn(process.execPath, args, {
        stdio: ["ignore", fd, fd],
        cwd: repoRoot,
        env: { ...process.env, ...o.env },
        detached: o.detached ?? false,
      });
      closeSync(fd);
      let alive = true;
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
        child.once("exit", (code, signal) => {
          alive = false;
          processes.delete(proc);
          resolve({ code, signal });
        });
      });
      const proc: OperatorProcess = {
        identity: o.identity,
        pid: child.pid ?? -1,
        logFile: o.logFile,
        signalled: false,
        exited,
        alive: () => alive,
        async kill(signal) {
          if (!alive) return;
          proc.signalled = true;
          child.kill(signal);
          await exited;
        },
      };
      processes.add(proc);
      return proc;
    };

    return {
      dir,
      instanceId: options.instanceId,
      service,
      devkube,
      crds,
      operatorApiUrl,
      operatorKubeconfigPath,
      startOperator,
      superviseOperator: (o) => {
        const supervisor = supervise(startOperator, o);
        cleanups.push(() => supervisor.stop());
        return supervisor;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// Restarts the operator whenever it exits, as a Deployment would; its pid is kept in pidFile. Backoff doubles
// while it keeps dying quickly and resets after a minute of uptime.
function supervise(start: (o: StartOperatorOptions) => OperatorProcess, o: SuperviseOptions): Supervisor {
  let current: OperatorProcess | undefined;
  let stopping = false;
  let delay = o.restartDelayMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let waiters: ((pid: number) => void)[] = [];

  const launch = () => {
    const started = Date.now();
    const p = start({ identity: o.identity, logFile: o.logFile, args: o.args ?? [], detached: true });
    current = p;
    void writeFile(o.pidFile, `${p.pid}\n`);
    for (const w of waiters) w(p.pid);
    waiters = [];
    void p.exited.then(({ code, signal }) => {
      if (current === p) current = undefined;
      if (stopping) return;
      delay = Date.now() - started > 60_000 ? o.restartDelayMs : delay;
      o.say?.(`operator        exited (${signal ?? `code ${code}`}); restarting in ${Math.round(delay / 100) / 10} s`);
      timer = setTimeout(launch, delay);
      delay = Math.min(delay * 2, 30_000);
    });
  };
  launch();

  return {
    pid: () => current?.pid,
    nextStart: () => new Promise((resolve) => waiters.push(resolve)),
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      const p = current;
      if (p?.alive()) {
        const killer = setTimeout(() => void p.kill("SIGKILL"), 10_000);
        await p.kill("SIGTERM");
        clearTimeout(killer);
      }
      if (existsSync(o.pidFile)) await rm(o.pidFile, { force: true });
    },
  };
}
