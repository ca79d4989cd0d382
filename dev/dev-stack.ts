import { mkdir, readFile, rm, symlink, unlink, writeFile, rename } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { kubectlPath } from "@mds/devkube/kubectl-path";
import { credentialsSecret, startStack, until } from "./stack.ts";
const devInstanceId = "dev";

interface DevStackOptions {
  dir: string;
  /** Progress lines for the terminal (never secrets). */
  say?: (line: string) => void;
  /** Restart delay of the operator child after a crash; doubles up to 30 s while it keeps crashing. */
  restartDelayMs?: number;
  /** Extra flags for the operator child (tests shorten poll intervals). */
  operatorArgs?: string[];
}

/** The namespaces `mds dev` lends its token to (--credentials-fallback-namespaces): the quick start's. */
const devTokenNamespaces = "default";

export interface DevStack {
  dir: string;
  env: {
    KUBECONFIG: string;
    MDS_API_URL: string;
    MDS_TOKEN: string;
    KUBECTL?: string;
    NODE_EXTRA_CA_CERTS: string;
    PGSSLROOTCERT: string;
  };
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
  const ports = {
    postgres: await freePort(),
    service: await freePort(),
    devkube: await freePort(),
    health: await freePort(),
  };
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
  const cmdline =
    Number.isInteger(pid) && pid > 0 ? await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "") : "";
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
  await until(async () => !isAlive(pid), `the previous operator (pid ${pid}) to stop`, 15_000).catch(() =>
    process.kill(pid, "SIGKILL"),
  );
}

// Likewise a PostgreSQL left running by a killed mds dev (its children outlive a SIGKILL): a fast shutdown, so the
// new start owns its data directory again.
async function stopOrphanPostgres(dataDir: string): Promise<void> {
  const pid = Number((await readFile(path.join(dataDir, "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const cmdline = (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).split("\0");
  if (!cmdline.some((a) => a.endsWith("postgres")) || !cmdline.includes(dataDir)) return;
  process.kill(pid, "SIGINT");
  await until(async () => !isAlive(pid), `the previous PostgreSQL (pid ${pid}) to stop`, 20_000).catch(() =>
    process.kill(pid, "SIGQUIT"),
  );
}

// KEY=value lines that dotenv parsers (node --env-file, python-dotenv) read, plus a last line that makes
// `source .mds/env` export them, so kubectl started from that shell sees KUBECONFIG.
function renderEnvFile(env: Record<string, string>): string {
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
    const stack = await startStack({
      dir,
      instanceId: devInstanceId,
      say,
      // Logs: service.log and devkube.log in dir (the stack's default).
      service: { port: ports.service, postgresPort: ports.postgres },
      devkube: { port: ports.devkube },
      // The quick start's namespace only. Every namespace that uses one token sees every database of its workspace:
      // with "*", any namespace could adopt (spec.externalId) and delete the databases another one created.
      fallbackNamespaces: devTokenNamespaces,
    });
    cleanups.push(() => stack.stop());
    say(
      `token           lent to namespace "${devTokenNamespaces}" only; another namespace needs its own mds-credentials Secret (the same token shares this workspace with "${devTokenNamespaces}", see docs/many-teams.md)`,
    );
    const { service, devkube: kube } = stack;

    const kubectl = await linkKubectl(path.join(dir, "bin"));
    const env = {
      KUBECONFIG: kube.kubeconfigPath,
      MDS_API_URL: service.url,
      MDS_TOKEN: service.token,
      ...(kubectl ? { KUBECTL: kubectl } : {}),
      // The local PostgreSQL and PgBouncer serve TLS under the stack's own CA: Node apps (the pg driver verifies
      // `sslmode=require`) and libpq tools in a shell that sourced activate trust it.
      NODE_EXTRA_CA_CERTS: service.caFile,
      PGSSLROOTCERT: service.caFile,
    };

    const healthUrl = `http://127.0.0.1:${ports.health}`;
    const operator = stack.superviseOperator({
      identity: "mds-dev",
      logFile: path.join(dir, "operator.log"),
      pidFile: path.join(dir, "operator.pid"),
      args: [
        "--lease-namespace",
        credentialsSecret.namespace,
        "--metrics-address",
        `127.0.0.1:${ports.health}`,
        // devkube rolls Deployments and runs pods: a rotation can follow its consumers (examples/rotation/).
        "--rotation-consumers",
        ...(options.operatorArgs ?? []),
      ],
      restartDelayMs: options.restartDelayMs ?? 1000,
      say,
    });
    await until(async () => (await fetch(`${healthUrl}/readyz`)).ok, "the operator to become ready", 120_000);
    say(
      `operator        running (pid ${operator.pid() ?? "?"}, log ${path.join(dir, "operator.log")}, health ${healthUrl}/readyz)`,
    );

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
