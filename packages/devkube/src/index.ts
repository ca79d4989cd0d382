import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { pino, type Logger } from "pino";
import { stringify as toYaml } from "yaml";
import { Api } from "./api.ts";
import { Controllers } from "./controllers.ts";
import { ConversionWebhooks, type ServiceAddresses } from "./conversion-webhook.ts";
import type { PodLifecycleOptions } from "./pod-lifecycle.ts";
import { Registry } from "./registry.ts";
import { defaultClusterRoles, rbacAuthorizer, TokenIssuer, type Authorizer } from "./rbac.ts";
import { createApp } from "./server.ts";
import { Store } from "./store.ts";
import { ensureTls } from "./tls.ts";
import { WatchHub } from "./watch.ts";
import { WorkloadControllers } from "./workload-controllers.ts";

export { kubeletNodeStatus, nodeArch, READY_ANNOTATION } from "./pod-lifecycle.ts";

export interface DevkubeOptions {
  dir: string;
  port?: number;
  host?: string;
  logger?: Logger;
  /** Events retained per resource type for watch resumption (older RVs get 410). */
  watchHistoryLimit?: number;
  /** Interval of BOOKMARK events on watches that allow them. */
  bookmarkIntervalMs?: number;
  /** Upper bound of a watch without timeoutSeconds (kube: 30–60 min). */
  maxWatchSeconds?: number;
  /** Serve aggregated discovery (kubectl's default path); false forces the legacy fan-out. */
  aggregatedDiscovery?: boolean;
  authorize?: Authorizer;
  /**
   * Where a conversion webhook's Service is reached ("namespace/name" → "host:port"; devkube's pods run nothing): its
   * certificate is checked for <name>.<namespace>.svc. A CRD's webhook by url needs nothing here.
   */
  services?: ServiceAddresses;
  /** Put the "default" ServiceAccount and "kube-root-ca.crt" ConfigMap in every namespace, as a cluster does (default true). */
  namespaceDefaults?: boolean;
  /**
   * The pod lifecycle (src/pod-lifecycle.ts): `kubelet: false` leaves pods scheduled but Pending for a test harness
   * to play the kubelet (default true); `readyDelayMs` from scheduling to Running and Ready (default 200); `nodes`,
   * the fake Nodes' names (default ["devkube-node"]).
   */
  pods?: Partial<PodLifecycleOptions>;
  /**
   * Run the workload controllers, the scheduler and the kubelet (default true); false serves the workload kinds as a
   * kube-apiserver without kube-controller-manager would: stored, with a status only a client writes.
   */
  workloadControllers?: boolean;
}

export interface Devkube {
  url: string;
  kubeconfigPath: string;
  kubeconfig: string;
  token: string;
  stop(): Promise<void>;
  /** Ends every open watch, as a real server does at its request timeout (for reconnect tests). */
  closeWatches(): void;
  /** Changes the per-type watch history length at runtime (for 410 tests). */
  setWatchHistoryLimit(n: number): void;
}

export async function startDevkube(options: DevkubeOptions): Promise<Devkube> {
  const dir = path.resolve(options.dir);
  const host = options.host ?? "127.0.0.1";
  const logger = options.logger ?? pino({ level: "silent" });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const token = await ensureToken(dir);
  const tls = await ensureTls(dir, host);

  const store = new Store(dir, options.watchHistoryLimit ?? 1000);
  const registry = new Registry();
  const webhooks = new ConversionWebhooks(options.services);
  const api = new Api(store, registry, () => undefined, webhooks);
  const controllers = new Controllers(
    api,
    store,
    registry,
    logger,
    options.namespaceDefaults === false ? undefined : tls.caCert,
  );
  const unwatch = controllers.watchStore();
  api.loadCrds();
  seed(api, registry);
  controllers.schedule();
  const workloads = new WorkloadControllers(api, store, registry, logger, {
    kubelet: options.pods?.kubelet ?? true,
    readyDelayMs: options.pods?.readyDelayMs ?? 200,
    nodes: options.pods?.nodes ?? ["devkube-node"],
  });
  const unwatchWorkloads = options.workloadControllers === false ? () => undefined : workloads.start();
  const watches = new WatchHub(store, api, {
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
    maxWatchSeconds: options.maxWatchSeconds ?? 1800,
  });
  // a deleted CRD's endpoints go away, and so do the watches on them (clients then get 404)
  registry.onRemoved((sk) => watches.closeAll(sk));

  let address = "";
  const app = createApp({
    api,
    store,
    registry,
    watches,
    logger,
    adminToken: token,
    serverAddress: () => address,
    aggregatedDiscovery: options.aggregatedDiscovery ?? true,
    tokens: new TokenIssuer(dir),
    authorize: options.authorize ?? rbacAuthorizer(store),
  });
  // client certificates are requested but optional: token clients send none
  const server: Server = createServer(
    { key: tls.serverKey, cert: tls.serverCert, ca: tls.caCert, requestCert: true, rejectUnauthorized: false },
    app,
  );
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  address = `${urlHost}:${port}`;
  const url = `https://${address}`;
  const kubeconfig = renderKubeconfig(url, tls.caCert, token, { cert: tls.clientCert, key: tls.clientKey });
  const kubeconfigPath = path.join(dir, "kubeconfig");
  await writeFile(`${kubeconfigPath}.tmp`, kubeconfig, { mode: 0o600 });
  await rename(`${kubeconfigPath}.tmp`, kubeconfigPath);
  logger.info({ url, kubeconfig: kubeconfigPath }, "devkube serving");

  let stopped = false;
  return {
    url,
    kubeconfigPath,
    kubeconfig,
    token,
    closeWatches: () => watches.closeAll(),
    setWatchHistoryLimit: (n) => {
      store.historyLimit = n;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      unwatch();
      unwatchWorkloads();
      workloads.stop();
      controllers.stop();
      watches.closeAll();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      store.close();
      await webhooks.stop();
    },
  };
}

/** What a fresh cluster has: the four system namespaces and the default ClusterRoles bindings refer to. */
function seed(api: Api, registry: Registry): void {
  const opts = { dryRun: false, fieldManager: "devkube", userAgent: "devkube", fieldValidation: "Strict" as const };
  const namespaces = registry.lookup("", "v1", "namespaces");
  const clusterRoles = registry.lookup("rbac.authorization.k8s.io", "v1", "clusterroles");
  if (!namespaces || !clusterRoles) throw new Error("devkube registry lacks built-in kinds");
  const ensure = (rt: typeof namespaces, body: Record<string, unknown>): void => {
    const name = String((body["metadata"] as { name: string }).name);
    try {
      api.get(rt, "", name);
    } catch {
      api.create(rt, undefined, body, opts);
    }
  };
  for (const name of ["default", "kube-system", "kube-public", "kube-node-lease"])
    ensure(namespaces, { metadata: { name } });
  for (const role of defaultClusterRoles()) ensure(clusterRoles, role);
}

async function ensureToken(dir: string): Promise<string> {
  const file = path.join(dir, "token");
  if (existsSync(file)) {
    const t = (await readFile(file, "utf8")).trim();
    if (t) return t;
  }
  const token = randomBytes(32).toString("base64url");
  await writeFile(`${file}.tmp`, `${token}\n`, { mode: 0o600 });
  await rename(`${file}.tmp`, file);
  await chmod(file, 0o600);
  return token;
}

/** Two contexts: "devkube" (bearer token, the current one) and "cert" (client certificate). */
export function renderKubeconfig(
  url: string,
  caCert: string,
  token: string,
  client: { cert: string; key: string },
): string {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  return toYaml({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "devkube", cluster: { server: url, "certificate-authority-data": b64(caCert) } }],
    users: [
      { name: "devkube-admin", user: { token } },
      {
        name: "devkube-cert",
        user: { "client-certificate-data": b64(client.cert), "client-key-data": b64(client.key) },
      },
    ],
    contexts: [
      { name: "devkube", context: { cluster: "devkube", user: "devkube-admin", namespace: "default" } },
      { name: "cert", context: { cluster: "devkube", user: "devkube-cert", namespace: "default" } },
    ],
    "current-context": "devkube",
    preferences: {},
  });
}
