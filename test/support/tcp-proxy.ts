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

  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(options.targetPort, options.targetHost);
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
