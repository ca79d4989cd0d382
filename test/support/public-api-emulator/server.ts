import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { seededRandom } from "../fault-proxy.ts";
import { foreignBackup, foreignDatabase, foreignProject, foreignOverrides } from "./foreign.ts";
import {
  mapData,
  pick,
  publicBackup,
  publicCreatedConnection,
  publicDatabase,
  publicError,
  publicProject,
  publicReadConnection,
  requestFields,
  withoutHint,
  type Json,
} from "./rules.ts";

// The public Management API in front of a real mds service: the operator talks to it as to the public API (rules.ts
// says which documented behaviour each rewrite follows), while databases, connections and restores stay real. Faults
// are seeded: a lost response performs the request upstream and then drops the socket, as a network cut after the
// server acted would.

export type EmulatorFaults = {
  /** Share of POST/PATCH/DELETE requests performed upstream whose response is then lost (socket destroyed). */
  loseResponse?: number;
  /** Share of requests answered 503 without reaching upstream. */
  serverError?: number;
  seed?: number;
};

export type PublicApiEmulator = {
  url: string;
  /** Everything fails with 503 while on. */
  outage(on: boolean): void;
  /** Counts of injected faults, for run reports. */
  readonly stats: { lost: number; errors: number; requests: number };
  stop(): Promise<void>;
};

const id = String.raw`[A-Za-z0-9_]+`;
const route = (method: string, pattern: string) => ({
  method,
  re: new RegExp(`^${pattern.replaceAll(":id", `(${id})`)}$`),
});
const routes = {
  createProject: route("POST", "/v1/projects"),
  listProjects: route("GET", "/v1/projects"),
  project: route("GET", "/v1/projects/:id"),
  deleteProject: route("DELETE", "/v1/projects/:id"),
  createDatabase: route("POST", "/v1/databases"),
  listDatabases: route("GET", "/v1/databases"),
  createProjectDatabase: route("POST", "/v1/projects/:id/databases"),
  listProjectDatabases: route("GET", "/v1/projects/:id/databases"),
  database: route("GET", "/v1/databases/:id"),
  updateDatabase: route("PATCH", "/v1/databases/:id"),
  deleteDatabase: route("DELETE", "/v1/databases/:id"),
  restore: route("POST", "/v1/databases/:id/restore"),
  createConnection: route("POST", "/v1/databases/:id/connections"),
  connection: route("GET", "/v1/connections/:id"),
  listBackups: route("GET", "/v1/databases/:id/backups"),
  takeBackup: route("POST", "/v1/databases/:id/backups"),
  createBranch: route("POST", "/v1/projects/:id/branches"),
  listBranches: route("GET", "/v1/projects/:id/branches"),
  branch: route("GET", "/v1/branches/:id"),
  updateBranch: route("PATCH", "/v1/branches/:id"),
  deleteBranch: route("DELETE", "/v1/branches/:id"),
} as const;
type RouteName = keyof typeof routes;

function match(method: string, path: string): { name: RouteName | undefined; id: string | undefined } {
  for (const [name, r] of Object.entries(routes) as [RouteName, (typeof routes)[RouteName]][]) {
    const m = r.method === method ? r.re.exec(path) : null;
    if (m) return { name, id: m[1] };
  }
  return { name: undefined, id: undefined };
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export async function startPublicApiEmulator(options: {
  upstream: string;
  faults?: EmulatorFaults;
}): Promise<PublicApiEmulator> {
  const random = seededRandom(options.faults?.seed ?? 1);
  const stats = { lost: 0, errors: 0, requests: 0 };
  let down = false;

  async function upstream(
    method: string,
    path: string,
    auth: string | undefined,
    body?: unknown,
  ): Promise<{ status: number; body: unknown }> {
    // No Idempotency-Key ever goes upstream: the public API ignores it, so a re-sent POST acts twice.
    const res = await fetch(`${options.upstream}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: auth } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
  }

  /** The public answer to one request (status and body), from the upstream service's. */
  async function answer(req: IncomingMessage, path: string, query: string): Promise<{ status: number; body: unknown }> {
    const method = req.method ?? "GET";
    const auth = req.headers.authorization;
    const raw = method === "GET" || method === "DELETE" ? undefined : await readBody(req);
    const { name, id: pathId } = match(method, path);
    const forward = (body?: unknown) => upstream(method, `${path}${query}`, auth, body);
    switch (name) {
      case undefined:
        if (!/^\/v1\//.test(path)) return publicError(404, "not_found", "Not found");
        return forward(raw); // its error's hint is dropped by send(), as every answer's
      case "takeBackup":
        // Backups are the service's business in the public API (no such endpoint).
        return publicError(404, "not_found", "Not found");
      case "createProject":
      case "createDatabase":
      case "createProjectDatabase":
      case "updateDatabase":
      case "restore": {
        const fields = requestFields[name === "updateDatabase" ? "updateDatabase" : name];
        const res = await forward(pick(raw, fields));
        if (res.status >= 300) return res;
        return {
          status: res.status,
          body: mapData(res.body, (d) =>
            name === "createProject" ? publicProject(d, foreignOverrides) : publicDatabase(d, foreignOverrides),
          ),
        };
      }
      case "createBranch":
        return forward(pick(raw, requestFields.createBranch));
      case "listBranches":
      case "branch":
      case "updateBranch":
      case "deleteBranch":
        // Already the public shape and codes (PUBLIC-API.md "Branches"); PATCH refuses unknown fields there too.
        return forward(raw);
      case "createConnection": {
        const res = await forward(pick(raw, requestFields.createConnection));
        // The public API answers a created connection with 200 (SDK ~8543).
        return res.status === 201 ? { status: 200, body: mapData(res.body, publicCreatedConnection) } : res;
      }
      case "connection": {
        const res = await forward();
        if (res.status !== 200) return res;
        return { status: 200, body: mapData(res.body, publicReadConnection) };
      }
      case "deleteDatabase": {
        const db = await upstream("GET", `/v1/databases/${pathId!}`, auth);
        const data = (db.body as { data?: Json } | undefined)?.data;
        if (db.status === 200 && data?.["isDefault"] === true)
          return publicError(403, "forbidden", "Cannot delete the default environment");
        return forward();
      }
      case "deleteProject": {
        // Dependencies are the non-default databases; the default one goes with its project (rules.ts).
        const list = await upstream("GET", `/v1/projects/${pathId!}/databases`, auth);
        if (list.status !== 200) return list;
        const dbs = ((list.body as { data: Json[] }).data ?? []) as Json[];
        if (dbs.some((d) => d["isDefault"] !== true))
          return publicError(400, "bad_request", "Project cannot be deleted due to existing dependencies");
        for (const d of dbs) {
          const gone = await upstream("DELETE", `/v1/databases/${String(d["id"])}`, auth);
          if (gone.status >= 300 && gone.status !== 404) return gone;
        }
        return forward();
      }
      case "listProjects": {
        const res = await forward();
        if (res.status !== 200) return res;
        const body = mapData(res.body, (p) => publicProject(p, foreignOverrides)) as { data: unknown[] };
        // Foreign objects live in the workspace: a console-made project shows up in the first page of every walk.
        if (!query.includes("cursor=") && !query.includes("logicalId=")) body.data = [foreignProject, ...body.data];
        return { status: 200, body };
      }
      case "listDatabases":
      case "listProjectDatabases": {
        const res = await forward();
        if (res.status !== 200) return res;
        const body = mapData(res.body, (d) => publicDatabase(d, foreignOverrides)) as { data: unknown[] };
        // The console's clone is on no branch: it shows in an unfiltered first page, or one of databases on no branch.
        const unfiltered =
          !/[?&](cursor|logicalId|projectId|branchGitName)=/.test(query) &&
          (!/[?&]branchId=/.test(query) || /[?&]branchId=unassigned(&|$)/.test(query));
        if (name === "listDatabases" && unfiltered) body.data = [foreignDatabase, ...body.data];
        return { status: 200, body };
      }
      case "listBackups": {
        const res = await forward();
        if (res.status !== 200) return res;
        const body = mapData(res.body, publicBackup) as { data: unknown[]; pagination?: Json };
        // An incremental backup of unknown state, older than every other: newest-first order keeps it last.
        return {
          status: 200,
          body: { ...body, data: [...body.data, foreignBackup], pagination: { ...body.pagination, limit: null } },
        };
      }
      default: {
        const res = await forward();
        if (res.status >= 300) return res;
        return {
          status: res.status,
          body:
            name === "project"
              ? mapData(res.body, (p) => publicProject(p, foreignOverrides))
              : mapData(res.body, (d) => publicDatabase(d, foreignOverrides)),
        };
      }
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    stats.requests++;
    const url = new URL(req.url ?? "/", "http://emulator");
    const send = (status: number, body: unknown) => {
      const text = body === undefined ? "" : JSON.stringify(withoutHint(body));
      res.writeHead(status, text ? { "content-type": "application/json; charset=utf-8" } : {});
      res.end(text);
    };
    if (down || random() < (options.faults?.serverError ?? 0)) {
      stats.errors++;
      return send(503, { error: { code: "unavailable", message: "Service unavailable" } });
    }
    const out = await answer(req, url.pathname, url.search);
    if (req.method !== "GET" && random() < (options.faults?.loseResponse ?? 0)) {
      // The server acted; the answer never arrives.
      stats.lost++;
      req.socket.destroy();
      return;
    }
    send(out.status, out.status === 204 ? undefined : out.body);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    outage: (on) => (down = on),
    stats,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
