import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { newId } from "../../src/contract/index.ts";
import type { Clock } from "../../src/client/index.ts";

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

export type Handler = (req: RecordedRequest, res: ServerResponse) => void;

/** A local HTTP server whose behaviour each test scripts, one handler per request in order. */
export async function startScriptedServer() {
  const requests: RecordedRequest[] = [];
  let script: Handler[] = [];
  const unscripted: Handler = (_req, res) =>
    sendJson(res, 500, { error: { code: "internal_error", message: "no script", hint: "" } });
  let fallback = unscripted;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const recorded = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      requests.push(recorded);
      const handler = script.shift() ?? fallback;
      handler(recorded, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Replaces the script: handlers answer the next requests in order, then `otherwise`. */
    script(handlers: Handler[], otherwise?: Handler) {
      script = [...handlers];
      fallback = otherwise ?? unscripted;
      requests.length = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

export const reply =
  (status: number, body: unknown, headers: Record<string, string> = {}): Handler =>
  (_req, res) =>
    sendJson(res, status, body, headers);

export const errorReply = (
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
  hint = "",
): Handler => reply(status, { error: { code, message, hint } }, headers);

/** Tears the connection down without an answer (ECONNRESET / "other side closed"). */
export const resetConnection: Handler = (_req, res) => res.socket?.destroy();

/** Never answers; the client's timeout must end the wait. */
export const neverAnswer: Handler = () => undefined;

/** A clock whose sleeps return at once and advance time; it records every wait. */
export function fakeClock(
  start = Date.parse("2026-01-01T00:00:00Z"),
): Clock & { sleeps: number[]; advance(ms: number): void } {
  let now = start;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => now,
    advance(ms) {
      now += ms;
    },
    async sleep(ms, signal) {
      signal?.throwIfAborted();
      sleeps.push(ms);
      now += Math.max(0, ms);
      // Let I/O run between waits, as a real sleep would.
      await new Promise((resolve) => setImmediate(resolve));
      signal?.throwIfAborted();
    },
  };
}

const baseUrl = "http://127.0.0.1";

export function databaseJson(overrides: Record<string, unknown> = {}) {
  const id = newId("database");
  const projectId = newId("project");
  const connectionId = newId("connection");
  return {
    id,
    type: "database",
    url: `${baseUrl}/v1/databases/${id}`,
    name: "orders",
    status: "ready",
    createdAt: "2026-01-01T00:00:00.000Z",
    isDefault: true,
    defaultConnectionId: connectionId,
    region: { id: "eu-central-1", name: "Europe (Frankfurt)" },
    source: { type: "empty" },
    project: { id: projectId, url: `${baseUrl}/v1/projects/${projectId}`, name: "shop" },
    connections: [
      {
        id: connectionId,
        type: "connection",
        url: `${baseUrl}/v1/connections/${connectionId}`,
        name: "default",
        createdAt: "2026-01-01T00:00:00.000Z",
        kind: "postgres",
        endpoints: { direct: { host: "db.example", port: 5432 }, pooled: { host: "db.example", port: 6432 } },
        directConnection: { host: "db.example:5432", user: "u_orders", pass: "********" },
        database: { id, url: `${baseUrl}/v1/databases/${id}`, name: "orders" },
      },
    ],
    ...overrides,
  };
}

export function projectJson(overrides: Record<string, unknown> = {}) {
  const id = newId("project");
  const workspaceId = newId("workspace");
  return {
    id,
    type: "project",
    url: `${baseUrl}/v1/projects/${id}`,
    name: "shop",
    createdAt: "2026-01-01T00:00:00.000Z",
    defaultRegion: "eu-central-1",
    workspace: { id: workspaceId, url: `${baseUrl}/v1/workspaces/${workspaceId}`, name: "team" },
    ...overrides,
  };
}

let counter = 0;
/** A long random-looking token, unique per test so each gets its own shared rate budget. */
export function plantedToken(): string {
  counter += 1;
  return `mds_test_${counter}_${newId("workspace").slice(5)}`;
}
