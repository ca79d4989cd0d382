import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync } from "node:fs";
import { mkdir, readFile, rm, symlink, unlink, writeFile, rename } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ApiextensionsV1Api, ApiException, CoreV1Api, KubeConfig, loadYaml, type V1CustomResourceDefinition } from "@kubernetes/client-node";
import pino, { type Logger } from "pino";
import { startDevkube, type Devkube } from "../devkube/index.ts";
import { kubectlPath } from "../devkube/kubectl-path.ts";
import { startEmbeddedService, type EmbeddedService } from "../service/embedded.ts";
import { renderCrdFiles } from "../resources/crd.ts";

// `mds dev`: the whole local stack in one process tree, state under one directory (default .mds/):
//   service/   the embedded service and its private PostgreSQL (control data, every region, backups)
//   devkube/   devkube's objects, certificates, token and kubeconfig
//   ports.json the ports chosen on first start, reused so kubeconfig and env stay valid across restarts
//   env        KUBECONFIG, MDS_API_URL, MDS_TOKEN, KUBECTL (KEY=value lines); activate: the same as exports + PATH
//   operator.pid, operator.log   the supervised operator child

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
export const credentialsSecret = { namespace: "mds-system", name: "mds-credentials", key: "token" };
export const devInstanceId = "dev";

export interface DevStackOptions {
  dir: string;
  /** Progress lines for the terminal (never secrets). */
  say?: (line: string) => void;
  /** Restart delay of the operator child after a crash; doubles up to 30 s while it keeps crashing. */
  restartDelayMs?: number;
  /** Extra flags for the operator child (tests shorten poll intervals). */
  operatorArgs?: string[];
}

export interface DevStack {
  dir: string;
  env: { KUBECONFIG: string; MDS_API_URL: string; MDS_TOKEN: string; KUBECTL?: string };
  healthUrl: string;
  /** The operator child's current process id (also in operator.pid). */
  operatorPid(): number | undefined;
  /** Resolves after the next (re)start of the operator child. */
  nextOperatorStart(): Promise<number>;
  stop(): Promise<void>;
}

interface Ports {
  postgres: number;
  service: number;
  devkube: number;
  health: number;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

async function writeAtomic(file: string, text: string, mode = 0o600): Promise<void> {
  await writeFile(`${file}.tmp`, text, { mode });
  await rename(`${file}.tmp`, file);
}

async function loadPorts(file: string): Promise<Ports> {
  try {
    const p = JSON.parse(await readFile(file, "utf8")) as Partial<Ports>;
    if ([p.postgres, p.service, p.devkube, p.health].every((n) => typeof n === "number")) {
      for (const [what, port] of Object.entries(p)) {
        if (!(await portIsFree(port as number))) {
          throw new Error(
            `cannot start: port ${String(port)} (${what}, from ${file}) is in use; is another mds dev running? ` +
              `Stop it, or delete ${file} to choose new ports`,
          );
        }
      }
      return p as Ports;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT" && !(err instanceof SyntaxError)) throw err;
  }
  const ports = { postgres: await freePort(), service: await freePort(), devkube: await freePort(), health: await freePort() };
  await writeAtomic(file, JSON.stringify(ports, null, 2) + "\n", 0o644);
  return ports;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function claimDir(lockFile: string): Promise<void> {
  const previous = await readFile(lockFile, "utf8").catch(() => "");
  const pid = Number(previous.trim());
  // A pid file left by a killed mds dev may name a pid reused by an unrelated process: only a node process counts.
  const cmdline = Number.isInteger(pid) && pid > 0 ? await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "") : "";
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid) && (pid === process.pid || cmdline.includes("node"))) {
    throw new Error(`cannot start: mds dev already runs with this state directory (pid ${pid})`);
  }
  await writeFile(lockFile, `${process.pid}\n`);
}

// An operator child left behind by a killed `mds dev` would hold its port and keep writing: stop it first.
async function stopOrphanOperator(pidFile: string): Promise<void> {
  const pid = Number((await readFile(pidFile, "utf8").catch(() => "")).trim());
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).split("\0");
  if (!cmdline.some((a) => a.endsWith("mds.js")) || !cmdline.includes("operator")) return;
  process.kill(pid, "SIGTERM");
  await until(async () => !isAlive(pid), `the previous operator (pid ${pid}) to stop`, 15_000).catch(() => process.kill(pid, "SIGKILL"));
}

// Likewise a PostgreSQL left running by a killed mds dev (its children outlive a SIGKILL): a fast shutdown, so the
// new start owns its data directory again.
async function stopOrphanPostgres(dataDir: string): Promise<void> {
  const pid = Number((await readFile(path.join(dataDir, "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).split("\0");
  if (!cmdline.some((a) => a.endsWith("postgres")) || !cmdline.includes(dataDir)) return;
  process.kill(pid, "SIGINT");
  await until(async () => !isAlive(pid), `the previous PostgreSQL (pid ${pid}) to stop`, 20_000).catch(() => process.kill(pid, "SIGQUIT"));
}

function status(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
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

async function applyCredentials(kc: KubeConfig, token: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name: credentialsSecret.namespace } } });
  } catch (err) {
    if (status(err) !== 409) throw new Error(`cannot create namespace ${credentialsSecret.namespace}: ${errorText(err)}`);
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

// Only the status: client-node errors can carry request headers with the bearer token.
function errorText(err: unknown): string {
  if (err instanceof ApiException) return `HTTP ${err.code}`;
  return err instanceof Error ? err.message : String(err);
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
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

function fileLogger(file: string): Logger {
  return pino({ level: "info" }, pino.destination({ dest: file, append: true, mkdir: true, sync: false }));
}

// KEY=value lines that dotenv parsers (node --env-file, python-dotenv) read, plus a last line that makes
// `source .mds/env` export them, so kubectl started from that shell sees KUBECONFIG.
export function renderEnvFile(env: Record<string, string>): string {
  const quote = (v: string) => (/^[A-Za-z0-9_./:@%+,=-]*$/.test(v) ? v : `'${v.replaceAll("'", "'\\''")}'`);
  const lines = Object.entries(env).map(([k, v]) => `${k}=${quote(v)}`);
  return [...lines, `export ${Object.keys(env).join(" ")}`, ""].join("\n");
}

async function linkKubectl(binDir: string): Promise<string | undefined> {
  try {
    const real = await kubectlPath();
    await mkdir(binDir, { recursive: true });
    const link = path.join(binDir, "kubectl");
    await unlink(link).catch(() => undefined);
    await symlink(real, link);
    return link;
  } catch {
    return undefined; // kubectl from PATH then
  }
}

export async function startDevStack(options: DevStackOptions): Promise<DevStack> {
  const dir = path.resolve(options.dir);
  const say = options.say ?? (() => undefined);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const lockFile = path.join(dir, "dev.pid");
  await claimDir(lockFile);
  await stopOrphanOperator(path.join(dir, "operator.pid"));
  await stopOrphanPostgres(path.join(dir, "service", "postgres", "data"));
  const ports = await loadPorts(path.join(dir, "ports.json"));
  const cleanups: (() => Promise<void>)[] = [async () => rm(lockFile, { force: true })];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };

  try {
    say(`PostgreSQL and service starting (state in ${path.join(dir, "service")})`);
    const service: EmbeddedService = await startEmbeddedService({
      dir: path.join(dir, "service"),
      port: ports.service,
      postgresPort: ports.postgres,
      logger: fileLogger(path.join(dir, "service.log")),
    });
    cleanups.push(() => service.stop());
    say(`service         ${service.url} (PostgreSQL on port ${service.postgres.port}, log ${path.join(dir, "service.log")})`);

    const kube: Devkube = await startDevkube({
      dir: path.join(dir, "devkube"),
      port: ports.devkube,
      logger: fileLogger(path.join(dir, "devkube.log")),
    });
    cleanups.push(() => kube.stop());
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig);
    const crds = await applyCrds(kc);
    say(`devkube         ${kube.url} (CRDs installed: ${crds.join(", ")})`);
    await applyCredentials(kc, service.token);
    say(`credentials     Secret ${credentialsSecret.namespace}/${credentialsSecret.name}`);

    const kubectl = await linkKubectl(path.join(dir, "bin"));
    const env = {
      KUBECONFIG: kube.kubeconfigPath,
      MDS_API_URL: service.url,
      MDS_TOKEN: service.token,
      ...(kubectl ? { KUBECTL: kubectl } : {}),
    };

    const healthUrl = `http://127.0.0.1:${ports.health}`;
    const operator = superviseOperator({
      dir,
      args: [
        "--kubeconfig", kube.kubeconfigPath,
        "--api-url", service.url,
        "--credentials-secret", `${credentialsSecret.namespace}/${credentialsSecret.name}`,
        "--instance-id", devInstanceId,
        "--identity", "mds-dev",
        "--lease-namespace", credentialsSecret.namespace,
        "--metrics-address", `127.0.0.1:${ports.health}`,
        ...(options.operatorArgs ?? []),
      ],
      restartDelayMs: options.restartDelayMs ?? 1000,
      say,
    });
    cleanups.push(() => operator.stop());
    await until(async () => (await fetch(`${healthUrl}/readyz`)).ok, "the operator to become ready", 120_000);
    say(`operator        running (pid ${operator.pid() ?? "?"}, log ${path.join(dir, "operator.log")}, health ${healthUrl}/readyz)`);

    // Written last: its presence means the stack is ready.
    await writeAtomic(path.join(dir, "env"), renderEnvFile(env));
    const activate = [
      "# source this file: the mds dev stack's environment, and its kubectl first on PATH",
      ...Object.entries(env).map(([k, v]) => `export ${k}=${JSON.stringify(v)}`),
      ...(kubectl ? [`export PATH=${JSON.stringify(path.dirname(kubectl))}:"$PATH"`] : []),
      "",
    ].join("\n");
    await writeAtomic(path.join(dir, "activate"), activate);
    cleanups.push(async () => {
      await rm(path.join(dir, "env"), { force: true });
      await rm(path.join(dir, "activate"), { force: true });
    });

    return {
      dir,
      env,
      healthUrl,
      operatorPid: () => operator.pid(),
      nextOperatorStart: () => operator.nextStart(),
      stop: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

interface Supervisor {
  pid(): number | undefined;
  nextStart(): Promise<number>;
  stop(): Promise<void>;
}

// Runs `mds operator` as a child and restarts it whenever it exits, as a Deployment would; its pid is kept in
// operator.pid. Backoff doubles while it keeps dying quickly and resets after a minute of uptime.
function superviseOperator(o: { dir: string; args: string[]; restartDelayMs: number; say: (line: string) => void }): Supervisor {
  const pidFile = path.join(o.dir, "operator.pid");
  const logFile = path.join(o.dir, "operator.log");
  let child: ChildProcess | undefined;
  let stopping = false;
  let delay = o.restartDelayMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let waiters: ((pid: number) => void)[] = [];

  const launch = () => {
    const fd = openSync(logFile, "a");
    const started = Date.now();
    const c = spawn(process.execPath, [path.join(repoRoot, "bin/mds.js"), "operator", ...o.args], {
      stdio: ["ignore", fd, fd],
      cwd: repoRoot,
      // Its own process group: a terminal's Ctrl-C reaches only mds dev, which stops the parts in order
      // (a child that saw the SIGINT itself would exit and be "restarted" while everything shuts down).
      detached: true,
    });
    closeSync(fd);
    child = c;
    const pid = c.pid ?? -1;
    void writeFile(pidFile, `${pid}\n`);
    for (const w of waiters) w(pid);
    waiters = [];
    c.once("exit", (code, signal) => {
      if (child === c) child = undefined;
      if (stopping) return;
      delay = Date.now() - started > 60_000 ? o.restartDelayMs : delay;
      o.say(`operator        exited (${signal ?? `code ${code}`}); restarting in ${Math.round(delay / 100) / 10} s`);
      timer = setTimeout(launch, delay);
      delay = Math.min(delay * 2, 30_000);
    });
  };
  launch();

  return {
    pid: () => child?.pid,
    nextStart: () => new Promise((resolve) => waiters.push(resolve)),
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      const c = child;
      if (c && c.exitCode === null && c.signalCode === null) {
        const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
        c.kill("SIGTERM");
        const killer = setTimeout(() => c.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(killer);
      }
      if (existsSync(pidFile)) await rm(pidFile, { force: true });
    },
  };
}
