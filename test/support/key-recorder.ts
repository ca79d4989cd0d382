import http from "node:http";
import type { AddressInfo } from "node:net";

// A pass-through HTTP proxy that records the Idempotency-Key of every POST it forwards: which keys an operator
// sends, to which route (ids replaced by `:id`), and in which phase of a test. Headers other than the key, and
// bodies, are neither kept nor logged (they carry the token and credentials).

export interface SentKey {
  /** e.g. `POST /v1/databases/:id/connections` */
  route: string;
  key: string;
  phase: string;
}

export interface KeyRecorder {
  url: string;
  sent: SentKey[];
  /** Keys sent from now on are recorded under this phase. */
  setPhase(phase: string): void;
  stop(): Promise<void>;
}

const routeOf = (method: string, path: string) =>
  `${method} ${path.split("?")[0]!.replace(/\/(proj|db|br|con|bkp|wksp)_[A-Za-z0-9]+/g, "/:id")}`;

export async function startKeyRecorder(target: string): Promise<KeyRecorder> {
  const upstream = new URL(target);
  const sent: SentKey[] = [];
  let phase = "";
  const server = http.createServer((req, res) => {
    const key = req.headers["idempotency-key"];
    if (req.method === "POST" && typeof key === "string")
      sent.push({ route: routeOf(req.method, req.url ?? ""), key, phase });
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sent,
    setPhase: (p) => {
      phase = p;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
