import net from "node:net";
import type { AddressInfo } from "node:net";

// A byte-level proxy that can cut every open connection at once. Put in front of the Kubernetes
// API (devkube speaks HTTPS; the proxy never terminates TLS, so certificates keep working), it
// drops the operator's watches the way a load balancer or an apiserver restart does.

export interface TcpProxy {
  url: string;
  port: number;
  /** Destroys every open connection (both sides); new connections still work. Returns how many were cut. */
  dropConnections(): number;
  /**
   * Sends new connections to another port (a Kubernetes Service whose endpoint moved to a new pod), or, with
   * `undefined`, closes them at once (a Service with no ready endpoint). Open connections are left alone.
   */
  retarget(port: number | undefined): void;
  readonly openConnections: number;
  /** Connections accepted since start. */
  readonly accepted: number;
  stop(): Promise<void>;
}

export async function startTcpProxy(options: {
  targetHost: string;
  targetPort: number;
  host?: string;
  port?: number;
  protocol?: string;
}): Promise<TcpProxy> {
  const host = options.host ?? "127.0.0.1";
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let accepted = 0;
  let targetPort: number | undefined = options.targetPort;

  const server = net.createServer((client) => {
    accepted++;
    if (targetPort === undefined) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, options.targetHost);
    const pair = { client, upstream };
    pairs.add(pair);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", close);
    upstream.on("close", close);
    client.pipe(upstream);
    upstream.pipe(client);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `${options.protocol ?? "https"}://${host}:${port}`,
    port,
    dropConnections() {
      const n = pairs.size;
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      return n;
    },
    retarget(port) {
      targetPort = port;
    },
    get openConnections() {
      return pairs.size;
    },
    get accepted() {
      return accepted;
    },
    async stop() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
