// Plays the kubelet, and the cluster's Service routing, for the pods `helm test` creates on devkube (which runs no
// pods). Each new Pod of the namespace runs as a child process of this machine's Node 24 (the runtime the image's
// `node` is), its status written as a kubelet writes it: Running, then Succeeded or Failed with the exit code.
// The pod's network is an HTTP CONNECT proxy (Node's fetch uses it with NODE_USE_ENV_PROXY=1): a connection to
// `<service>.<namespace>.svc:<port>` reads that Service and port from the API server, as cluster DNS and
// kube-proxy would, and goes to the endpoint `endpoint` gives for them (none: the connection is refused).
// Only what the chart's hook pod uses is supported, one container whose command starts with `node`; any other pod
// fails with a message saying so, so a chart change cannot pass here unnoticed.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { pino } from "pino";
import { createKubeClient } from "../../src/kube/client.ts";
import { createInformer } from "../../src/kube/informer.ts";
import type { KubeConfig } from "../../src/kube/kubeconfig.ts";
import type { KubeObject, ResourceType } from "../../src/kube/types.ts";

const PodType: ResourceType = { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true };
const ServiceType: ResourceType = { group: "", version: "v1", plural: "services", kind: "Service", namespaced: true };

interface Container {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
}
interface Pod extends KubeObject {
  spec: { containers: Container[] };
  status?: { phase?: string };
}
export interface ServicePort {
  port: number;
  targetPort?: number | string;
}
export interface Service extends KubeObject {
  spec: { selector?: Record<string, string>; ports?: ServicePort[] };
}
export interface PodRun {
  name: string;
  exitCode: number;
  output: string;
}
export interface TestPodKubelet {
  /** The pods run so far, in the order they ended. */
  runs: PodRun[];
  stop(): Promise<void>;
}

export async function startTestPodKubelet(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  endpoint: (service: Service, port: ServicePort) => Promise<{ host: string; port: number } | undefined>;
}): Promise<TestPodKubelet> {
  const { kubeConfig, namespace } = options;
  const client = createKubeClient(kubeConfig);
  const runs: PodRun[] = [];
  const started = new Set<string>();
  const children = new Set<ChildProcess>();
  const sockets = new Set<Socket>();
  const pending = new Set<Promise<void>>();

  /** `name.namespace.svc[.cluster.local]:port` to the endpoint behind that Service port, if any. */
  async function route(target: string): Promise<{ host: string; port: number } | undefined> {
    const m = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?:(\d+)$/.exec(target);
    if (m === null) return undefined;
    const [, name = "", ns, port] = m;
    const service = await client.get<Service>(ServiceType, ns, name);
    const servicePort = service?.spec.ports?.find((p) => p.port === Number(port));
    return service === undefined || servicePort === undefined ? undefined : options.endpoint(service, servicePort);
  }

  const proxy: Server = createServer((_req, res) => res.writeHead(405).end("only CONNECT\n"));
  proxy.on("connect", (req, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    route(req.url ?? "").then(
      (to) => {
        if (to === undefined) return void socket.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
        const upstream = connect(to.port, to.host, () => {
          socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
          upstream.write(head);
          upstream.pipe(socket).pipe(upstream);
        });
        upstream.on("error", () => socket.destroy());
        socket.on("close", () => upstream.destroy());
      },
      () => socket.destroy(),
    );
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const address = proxy.address();
  const proxyUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`;

  const writeStatus = async (name: string, status: object) => {
    // The pod may be gone already (helm deletes a succeeded hook pod): nothing to report then.
    await client.patchStatus(PodType, namespace, name, { status }).catch(() => undefined);
  };

  async function run(pod: Pod): Promise<void> {
    const name = pod.metadata.name;
    const [container, ...others] = pod.spec.containers;
    const command = [...(container?.command ?? []), ...(container?.args ?? [])];
    if (container === undefined || others.length > 0 || command[0] !== "node") {
      const message = "this test kubelet runs one container whose command starts with node";
      runs.push({ name, exitCode: 1, output: message });
      return writeStatus(name, { phase: "Failed", message });
    }
    const startedAt = new Date().toISOString();
    await writeStatus(name, {
      phase: "Running",
      startTime: startedAt,
      containerStatuses: [{ name: container.name, ready: true, restartCount: 0, state: { running: { startedAt } } }],
    });
    const env: NodeJS.ProcessEnv = { PATH: "/usr/bin:/bin", HTTP_PROXY: proxyUrl, NODE_USE_ENV_PROXY: "1" };
    for (const e of container.env ?? []) env[e.name] = e.value ?? "";
    const child = spawn(process.execPath, command.slice(1), { env, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    const output: Buffer[] = [];
    child.stdout?.on("data", (b: Buffer) => output.push(b));
    child.stderr?.on("data", (b: Buffer) => output.push(b));
    const exitCode = await new Promise<number>((resolve) => child.on("close", (code) => resolve(code ?? 1)));
    children.delete(child);
    runs.push({ name, exitCode, output: Buffer.concat(output).toString("utf8") });
    const terminated = { exitCode, reason: exitCode === 0 ? "Completed" : "Error", startedAt, finishedAt: new Date().toISOString() };
    await writeStatus(name, {
      phase: exitCode === 0 ? "Succeeded" : "Failed",
      containerStatuses: [{ name: container.name, ready: false, restartCount: 0, state: { terminated } }],
    });
  }

  const informer = createInformer<Pod>({
    kubeConfig,
    client,
    type: PodType,
    namespace,
    logger: pino({ level: "silent" }),
    onEvent: (event, pod) => {
      const uid = pod.metadata.uid ?? pod.metadata.name;
      if (event === "delete" || pod.status?.phase !== "Pending" || started.has(uid)) return;
      started.add(uid);
      const p = run(pod).finally(() => pending.delete(p));
      pending.add(p);
    },
  });
  await informer.start();

  return {
    runs,
    async stop() {
      await informer.stop();
      for (const child of children) child.kill("SIGKILL");
      await Promise.all(pending);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}
