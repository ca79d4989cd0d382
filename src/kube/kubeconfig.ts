import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Agent, type Dispatcher } from "undici";
import { createRequire } from "node:module";
import { KubeError } from "./errors.ts";

// Our own kubeconfig and in-cluster loader. client-node does this too, but importing it loads its whole
// generated API (~80 MB RSS in the operator process), and it built a new TLS pool per request. This covers what
// operators meet in practice: the KUBECONFIG list, contexts, CA / insecure, bearer tokens and token files (re-read
// as they rotate), client certificates, exec credential plugins (EKS, GKE, AKS kubelogin) and in-cluster service
// account config. Not supported: the legacy `auth-provider` plugins (gcp, oidc, azure) and proxies.

export class KubeConfigError extends KubeError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { code: "config", ...options });
  }
}

/** What the operator needs to talk to one apiserver. */
export interface KubeConfig {
  /** The apiserver's base URL, without a trailing slash. */
  readonly server: string;
  /** The context in use ("in-cluster" for the service account). */
  readonly contextName: string;
  /**
   * One connection pool (with the cluster's TLS settings) shared by every request, with a bounded number of
   * connections: a burst of requests (Events are fire and forget) queues instead of opening hundreds of TLS
   * sockets whose buffers would stay in the process's RSS.
   */
  readonly dispatcher: Dispatcher;
  /** Watches hold their connection for minutes: a separate pool, so they never starve requests. */
  readonly watchDispatcher: Dispatcher;
  /**
   * A pool of its own for a caller that must not queue behind the others: leader election, whose renewal has to
   * land within the renew deadline even while a burst of reconciles fills the shared pool. Closed by close().
   */
  createDispatcher(options?: { connections?: number }): Dispatcher;
  /** Request headers with the current credentials (an exec plugin runs only when its credential expired). */
  authHeaders(): Promise<Record<string, string>>;
  /** Forget cached credentials (after a 401), so the next request fetches fresh ones. */
  invalidateCredentials(): void;
  close(): Promise<void>;
}

export interface LoadKubeConfigOptions {
  /** KUBECONFIG's value: files joined by the path delimiter (the first to define a name wins). */
  kubeconfig?: string | undefined;
  context?: string | undefined;
  /** Use the pod's service account (when no kubeconfig is given). */
  inCluster?: boolean | undefined;
  /**
   * For ~/.kube/config, in-cluster KUBERNETES_SERVICE_HOST/PORT, and the environment of exec plugins (which get
   * only this plus their own `env`: the CLI passes process.env; only src/cli reads it).
   */
  env?: Record<string, string | undefined> | undefined;
  homeDir?: string | undefined;
  /** In-cluster files (tests point this elsewhere). */
  serviceAccountDir?: string | undefined;
  now?: () => number;
}

interface NamedCluster {
  server?: string;
  "certificate-authority"?: string;
  "certificate-authority-data"?: string;
  "insecure-skip-tls-verify"?: boolean;
  "tls-server-name"?: string;
  "proxy-url"?: string;
}
interface ExecConfig {
  apiVersion?: string;
  command?: string;
  args?: string[] | null;
  env?: Array<{ name: string; value: string }> | null;
}
interface NamedUser {
  token?: string;
  tokenFile?: string;
  "client-certificate"?: string;
  "client-certificate-data"?: string;
  "client-key"?: string;
  "client-key-data"?: string;
  username?: string;
  password?: string;
  exec?: ExecConfig;
  "auth-provider"?: { name?: string };
}
interface RawKubeConfig {
  "current-context"?: string;
  clusters?: Array<{ name: string; cluster: NamedCluster }> | null;
  users?: Array<{ name: string; user: NamedUser }> | null;
  contexts?: Array<{ name: string; context: { cluster: string; user?: string } }> | null;
}

/** Resolved pieces, each entry remembering the directory its file was in (relative paths resolve there). */
interface Merged {
  currentContext: string | undefined;
  clusters: Map<string, { value: NamedCluster; dir: string }>;
  users: Map<string, { value: NamedUser; dir: string }>;
  contexts: Map<string, { cluster: string; user?: string | undefined }>;
}

const serviceAccountDefault = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Concurrent requests per apiserver (client-go's default QPS burst is 10; workers × kinds stay below this). */
const maxConnections = 16;
/** client-go re-reads a token file at most once a minute. */
const tokenFileRefreshMs = 60_000;

/** Loads `--kubeconfig`/KUBECONFIG (a list), else in-cluster config when asked, else ~/.kube/config. */
export function loadKubeConfig(options: LoadKubeConfigOptions = {}): KubeConfig {
  const files = (options.kubeconfig ?? "").split(path.delimiter).filter((f) => f !== "");
  if (files.length === 0 && options.inCluster) return inClusterKubeConfig(options);
  const home = options.homeDir ?? options.env?.["HOME"];
  const noCluster = "no Kubernetes cluster configured: pass --kubeconfig or set KUBECONFIG";
  if (files.length === 0) {
    const fallback = home === undefined ? undefined : path.join(home, ".kube", "config");
    if (fallback === undefined || !existsSync(fallback)) throw new KubeConfigError(noCluster);
    files.push(fallback);
  }
  const merged: Merged = { currentContext: undefined, clusters: new Map(), users: new Map(), contexts: new Map() };
  let found = 0;
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      // kubectl skips missing files of the list; a single named file must exist.
      if ((err as NodeJS.ErrnoException).code === "ENOENT" && files.length > 1) continue;
      throw new KubeConfigError(`cannot read kubeconfig ${file}: ${(err as Error).message}`, { cause: err });
    }
    found++;
    mergeInto(merged, parseRaw(text, file), path.dirname(path.resolve(file)));
  }
  if (found === 0) throw new KubeConfigError(`cannot read kubeconfig: none of ${files.join(", ")} exists`);
  return fromMerged(merged, options);
}

/** A kubeconfig given as YAML text (tests; devkube hands one out). Relative paths resolve against `baseDir`. */
export function parseKubeConfig(text: string, options: LoadKubeConfigOptions & { baseDir?: string } = {}): KubeConfig {
  const merged: Merged = { currentContext: undefined, clusters: new Map(), users: new Map(), contexts: new Map() };
  mergeInto(merged, parseRaw(text, "kubeconfig"), options.baseDir ?? process.cwd());
  return fromMerged(merged, options);
}

// The YAML parser is loaded only when a kubeconfig file is read: in a cluster (the image's case) the operator never
// parses YAML; loading the parser at start cost about 1 MB of RSS (its 72 modules' code and source text; measured in
// bench/history/2026-11-26-operator-memory.md).
const requireFromHere = createRequire(import.meta.url);
const parseYaml = (text: string): unknown => (requireFromHere("yaml") as typeof import("yaml")).parse(text);

function parseRaw(text: string, file: string): RawKubeConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new KubeConfigError(`cannot parse kubeconfig ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (raw === null || raw === undefined) return {};
  if (typeof raw !== "object" || Array.isArray(raw))
    throw new KubeConfigError(`cannot parse kubeconfig ${file}: not a mapping`);
  return raw as RawKubeConfig;
}

function mergeInto(merged: Merged, raw: RawKubeConfig, dir: string): void {
  merged.currentContext ??= raw["current-context"] || undefined;
  for (const c of raw.clusters ?? [])
    if (c?.name !== undefined && !merged.clusters.has(c.name))
      merged.clusters.set(c.name, { value: c.cluster ?? {}, dir });
  for (const u of raw.users ?? [])
    if (u?.name !== undefined && !merged.users.has(u.name)) merged.users.set(u.name, { value: u.user ?? {}, dir });
  for (const c of raw.contexts ?? [])
    if (c?.name !== undefined && !merged.contexts.has(c.name) && c.context) merged.contexts.set(c.name, c.context);
}

function fromMerged(merged: Merged, options: LoadKubeConfigOptions): KubeConfig {
  const contextName = options.context ?? merged.currentContext;
  if (contextName === undefined)
    throw new KubeConfigError(
      "no Kubernetes cluster configured: the kubeconfig has no current-context (pass --context, or set KUBECONFIG)",
    );
  const context = merged.contexts.get(contextName);
  if (context === undefined) throw new KubeConfigError(`kubeconfig has no context "${contextName}"`);
  const cluster = merged.clusters.get(context.cluster);
  if (cluster === undefined || cluster.value.server === undefined || cluster.value.server === "")
    throw new KubeConfigError(`kubeconfig context "${contextName}": cluster "${context.cluster}" has no server`);
  const user = context.user === undefined ? undefined : merged.users.get(context.user);
  if (context.user !== undefined && user === undefined)
    throw new KubeConfigError(`kubeconfig context "${contextName}": no user "${context.user}"`);
  const c = cluster.value;
  const server = cluster.value.server;
  if (c["proxy-url"] !== undefined)
    throw new KubeConfigError(`kubeconfig cluster "${context.cluster}": proxy-url is not supported`);
  const u = user?.value ?? {};
  const resolve = (dir: string, p: string) => path.resolve(dir, p);
  const file = (what: string, p: string, dir: string) => {
    try {
      return readFileSync(resolve(dir, p));
    } catch (err) {
      throw new KubeConfigError(
        `kubeconfig context "${contextName}": cannot read ${what} ${p}: ${(err as Error).message}`,
        { cause: err },
      );
    }
  };
  const b64 = (value: string) => Buffer.from(value, "base64");
  const ca = c["certificate-authority-data"]
    ? b64(c["certificate-authority-data"])
    : c["certificate-authority"]
      ? file("certificate-authority", c["certificate-authority"], cluster.dir)
      : undefined;
  const userDir = user?.dir ?? cluster.dir;
  const cert = u["client-certificate-data"]
    ? b64(u["client-certificate-data"])
    : u["client-certificate"]
      ? file("client-certificate", u["client-certificate"], userDir)
      : undefined;
  const key = u["client-key-data"]
    ? b64(u["client-key-data"])
    : u["client-key"]
      ? file("client-key", u["client-key"], userDir)
      : undefined;
  if (u["auth-provider"] !== undefined && u.exec === undefined && u.token === undefined) {
    throw new KubeConfigError(
      `kubeconfig user "${context.user}": auth-provider "${u["auth-provider"].name ?? "?"}" is not supported; use an exec credential plugin`,
    );
  }
  const now = options.now ?? Date.now;
  let auth: CredentialSource;
  if (u.exec !== undefined)
    auth = execCredential(u.exec, userDir, options.env, now, `kubeconfig user "${context.user}"`);
  else if (u.token !== undefined) auth = staticCredential({ authorization: `Bearer ${u.token}` });
  else if (u.tokenFile !== undefined) auth = tokenFileCredential(resolve(userDir, u.tokenFile), now);
  else if (u.username !== undefined)
    auth = staticCredential({
      authorization: `Basic ${Buffer.from(`${u.username}:${u.password ?? ""}`).toString("base64")}`,
    });
  else auth = staticCredential({});
  return build(
    server.replace(/\/+$/, ""),
    contextName,
    {
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert }),
      ...(key === undefined ? {} : { key }),
      rejectUnauthorized: c["insecure-skip-tls-verify"] !== true,
      ...(c["tls-server-name"] ? { servername: c["tls-server-name"] } : {}),
    },
    auth,
  );
}

/** The pod's service account: token (re-read as the kubelet rotates it), CA, KUBERNETES_SERVICE_HOST/PORT. */
export function inClusterKubeConfig(options: LoadKubeConfigOptions = {}): KubeConfig {
  const host = options.env?.["KUBERNETES_SERVICE_HOST"];
  const port = options.env?.["KUBERNETES_SERVICE_PORT"] ?? "443";
  if (host === undefined || host === "")
    throw new KubeConfigError("cannot load in-cluster config: KUBERNETES_SERVICE_HOST is not set");
  const dir = options.serviceAccountDir ?? serviceAccountDefault;
  let ca: Buffer;
  try {
    ca = readFileSync(path.join(dir, "ca.crt"));
  } catch (err) {
    throw new KubeConfigError(`cannot load in-cluster config: ${(err as Error).message}`, { cause: err });
  }
  const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return build(
    server,
    "in-cluster",
    { ca, rejectUnauthorized: true },
    tokenFileCredential(path.join(dir, "token"), options.now ?? Date.now),
  );
}

interface CredentialSource {
  headers(): Promise<Record<string, string>>;
  invalidate(): void;
}

function build(
  server: string,
  contextName: string,
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer; rejectUnauthorized: boolean; servername?: string },
  auth: CredentialSource,
): KubeConfig {
  let dispatcher: Agent | undefined;
  let watchDispatcher: Agent | undefined;
  const own: Agent[] = [];
  return {
    server,
    contextName,
    get dispatcher() {
      // Created once: one pool, one TLS session cache, reused by every request and Lease renewal.
      dispatcher ??= new Agent({ connect: tls, keepAliveTimeout: 30_000, connections: maxConnections });
      return dispatcher;
    },
    get watchDispatcher() {
      watchDispatcher ??= new Agent({ connect: tls, keepAliveTimeout: 30_000 });
      return watchDispatcher;
    },
    createDispatcher(options = {}) {
      const agent = new Agent({
        connect: tls,
        keepAliveTimeout: 30_000,
        ...(options.connections === undefined ? {} : { connections: options.connections }),
      });
      own.push(agent);
      return agent;
    },
    authHeaders: () => auth.headers(),
    invalidateCredentials: () => auth.invalidate(),
    async close() {
      await Promise.all([dispatcher?.close(), watchDispatcher?.close(), ...own.splice(0).map((a) => a.close())]);
      dispatcher = undefined;
      watchDispatcher = undefined;
    },
  };
}

function staticCredential(headers: Record<string, string>): CredentialSource {
  return { headers: async () => ({ ...headers }), invalidate: () => undefined };
}

function tokenFileCredential(file: string, now: () => number): CredentialSource {
  let cached: { token: string; at: number } | undefined;
  return {
    async headers() {
      if (cached === undefined || now() - cached.at >= tokenFileRefreshMs) {
        try {
          cached = { token: (await readFile(file, "utf8")).trim(), at: now() };
        } catch (err) {
          // Keep the previous token through a transient failure (the kubelet swaps the file atomically).
          if (cached === undefined)
            throw new KubeConfigError(
              `cannot read token file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
              { cause: err },
            );
        }
      }
      return { authorization: `Bearer ${cached.token}` };
    },
    invalidate() {
      cached = undefined;
    },
  };
}

interface ExecCredentialStatus {
  token?: string;
  expirationTimestamp?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
}

/** client.authentication.k8s.io ExecCredential: run the plugin, cache its token until expirationTimestamp. */
function execCredential(
  exec: ExecConfig,
  dir: string,
  env: Record<string, string | undefined> | undefined,
  now: () => number,
  who: string,
): CredentialSource {
  if (!exec.command) throw new KubeConfigError(`${who}: exec has no command`);
  const apiVersion = exec.apiVersion ?? "client.authentication.k8s.io/v1";
  // A relative command with a slash is relative to the kubeconfig's directory (as kubectl does); a bare name is looked up in PATH.
  const command = exec.command.includes("/") ? path.resolve(dir, exec.command) : exec.command;
  let cached: { token: string; expiresAt: number } | undefined;
  let inFlight: Promise<string> | undefined;

  function run(): Promise<string> {
    return new Promise<string>((resolvePromise, reject) => {
      const childEnv: Record<string, string | undefined> = {
        ...(env ?? {}),
        KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion, kind: "ExecCredential", spec: { interactive: false } }),
      };
      for (const e of exec.env ?? []) childEnv[e.name] = e.value;
      const child = spawn(command, exec.args ?? [], { env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let errText = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (errText += d.toString()));
      child.on("error", (err) =>
        reject(new KubeConfigError(`${who}: cannot run exec plugin ${exec.command}: ${err.message}`, { cause: err })),
      );
      child.on("close", (code) => {
        // Never echo stdout: it holds the credential.
        if (code !== 0)
          return reject(
            new KubeConfigError(
              `${who}: exec plugin ${exec.command} exited with ${code}: ${errText.trim().slice(0, 300)}`,
            ),
          );
        let status: ExecCredentialStatus | undefined;
        try {
          status = (JSON.parse(out) as { status?: ExecCredentialStatus }).status;
        } catch {
          return reject(new KubeConfigError(`${who}: exec plugin ${exec.command} did not print an ExecCredential`));
        }
        if (!status?.token) {
          return reject(
            new KubeConfigError(
              `${who}: exec plugin ${exec.command} returned no token (client certificates from exec plugins are not supported)`,
            ),
          );
        }
        const expiresAt = status.expirationTimestamp
          ? Date.parse(status.expirationTimestamp)
          : Number.POSITIVE_INFINITY;
        cached = { token: status.token, expiresAt: Number.isNaN(expiresAt) ? Number.POSITIVE_INFINITY : expiresAt };
        resolvePromise(status.token);
      });
    });
  }

  return {
    async headers() {
      // Renew a little before expiry so a request in flight does not carry a token that lapses on the way.
      if (cached !== undefined && now() < cached.expiresAt - 10_000) return { authorization: `Bearer ${cached.token}` };
      inFlight ??= run().finally(() => (inFlight = undefined));
      return { authorization: `Bearer ${await inFlight}` };
    },
    invalidate() {
      cached = undefined;
    },
  };
}
