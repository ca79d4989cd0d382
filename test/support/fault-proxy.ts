import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

// A local HTTP proxy in front of the service that injects faults, on command or by a seeded
// schedule, and counts what passes through it. Chaos runs and benchmarks use it to throttle,
// break and cut off the API the operator talks to, and to prove that the operator stays within
// its call and rate budgets (it counts calls per route, per second and per credential).

/** One fault the proxy can inject into a request. */
export type Fault =
  /** 429 `rate_limited` with `Retry-After: <retryAfterSeconds>`; the request never reaches the service. */
  | { kind: "rate-limit"; retryAfterSeconds: number }
  /** A 5xx error body; the request never reaches the service. 503 also sets `Retry-After: 1`. */
  | { kind: "server-error"; status: number }
  /** The client's socket is destroyed before any response; the request never reaches the service. */
  | { kind: "reset" }
  /** The request is forwarded after `delayMs`. */
  | { kind: "slow"; delayMs: number }
  /** The request is forwarded (the service acts on it) but only half of the response body arrives before the socket closes. */
  | { kind: "truncate" }
  /** The request is forwarded (the service acts on it) and the client's socket is destroyed instead of answering: an outcome the client cannot know. */
  | { kind: "reset-after-forward" };

export type FaultKind = Fault["kind"];

export interface RequestMatch {
  method?: string;
  /** Matched against the normalised route, e.g. `POST /v1/databases/:id/restore`. */
  route?: string | RegExp;
}

export interface FaultRule {
  match?: RequestMatch;
  fault: Fault;
  /** How many matching requests get the fault (default: every one until cleared). */
  times?: number;
}

/** Random faults from a seeded generator: each request independently gets at most one fault. */
export interface FaultSchedule {
  seed: number;
  /** Probability per request of each kind, summing to at most 1. */
  rates: Partial<Record<FaultKind, number>>;
  retryAfterSeconds?: number;
  slowDelayMs?: number;
  match?: RequestMatch;
}

export type OutageMode =
  /** The listening socket is closed: new connections are refused (ECONNREFUSED), open ones are destroyed. */
  | "refuse"
  /** Every request gets 503 `unavailable` with `Retry-After`. */
  | "unavailable";

export interface FaultProxyOptions {
  /** Base URL of the service, e.g. `http://127.0.0.1:8080`. Only http is supported. */
  target: string;
  host?: string;
  /** 0 = a free port. */
  port?: number;
  schedule?: FaultSchedule;
  /** Milliseconds since the epoch; tests pass a fake clock. */
  now?: () => number;
}

export interface ProxyStats {
  total: number;
  /** Requests per normalised route (`GET /v1/databases`, `POST /v1/databases/:id/restore`, …). */
  byRoute: Record<string, number>;
  /** Requests per whole second (epoch seconds → count). */
  perSecond: Map<number, number>;
  /** Most requests in any one-second window (sliding), over all credentials. */
  peakPerSecond: number;
  /** Most requests in any one-second window for any one credential (keyed by a hash of the Authorization header). */
  peakPerSecondByCredential: Record<string, number>;
  /** Faults actually injected, by kind (outage refusals count as `outage`). */
  faults: Record<string, number>;
  /** Responses by status code, as the client saw them (`reset` for destroyed sockets). */
  byStatus: Record<string, number>;
}

export interface FaultProxy {
  url: string;
  port: number;
  /** Adds a rule; rules are tried in order and the first match wins (before the schedule). */
  inject(rule: FaultRule): void;
  clearFaults(): void;
  setSchedule(schedule: FaultSchedule | undefined): void;
  /** Starts an outage; with `durationMs` it ends by itself. */
  startOutage(mode: OutageMode, durationMs?: number): Promise<void>;
  endOutage(): Promise<void>;
  readonly outage: OutageMode | undefined;
  stats(): ProxyStats;
  resetStats(): void;
  stop(): Promise<void>;
}

/** mulberry32: small, fast and good enough to make fault schedules reproducible from a seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const idSegment = /^(proj|db|con|bkp|wksp)_[A-Za-z0-9]+$|^[cC][a-z0-9]{20,}$/;

/** `GET /v1/databases/db_c123…/restore?x=1` → `GET /v1/databases/:id/restore`. */
export function normaliseRoute(method: string, url: string): string {
  const path = url.split("?")[0] ?? "";
  const segments = path.split("/").map((s) => (idSegment.test(s) ? ":id" : s));
  return `${method.toUpperCase()} ${segments.join("/")}`;
}

function matches(match: RequestMatch | undefined, method: string, route: string): boolean {
  if (match === undefined) return true;
  if (match.method !== undefined && match.method.toUpperCase() !== method.toUpperCase()) return false;
  if (match.route === undefined) return true;
  return typeof match.route === "string" ? match.route === route : match.route.test(route);
}

function credentialKey(header: string | undefined): string {
  if (header === undefined) return "anonymous";
  // Never keep the token itself: a short hash is enough to tell credentials apart.
  return createHash("sha256").update(header).digest("hex").slice(0, 12);
}

function errorBody(code: string, message: string): string {
  return JSON.stringify({ error: { code, message, hint: "injected by the fault proxy" } });
}

/** Sliding one-second peak over sorted timestamps. */
function slidingPeak(times: number[]): number {
  let peak = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] ?? 0) - (times[start] ?? 0) >= 1000) start++;
    peak = Math.max(peak, end - start + 1);
  }
  return peak;
}

function chooseScheduled(schedule: FaultSchedule, random: () => number): Fault | undefined {
  const roll = random();
  let acc = 0;
  const order: FaultKind[] = ["rate-limit", "server-error", "reset", "slow", "truncate", "reset-after-forward"];
  for (const kind of order) {
    acc += schedule.rates[kind] ?? 0;
    if (roll < acc) {
      switch (kind) {
        case "rate-limit":
          return { kind, retryAfterSeconds: schedule.retryAfterSeconds ?? 1 };
        case "server-error":
          // A second draw picks the status; deterministic too.
          return { kind, status: random() < 0.5 ? 500 : 503 };
        case "slow":
          return { kind, delayMs: schedule.slowDelayMs ?? 500 };
        default:
          return { kind } as Fault;
      }
    }
  }
  return undefined;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = new URL(options.target);
  if (target.protocol !== "http:")
    throw new Error(`cannot start fault proxy: target ${target.protocol} is not supported, only http:`);
  const now = options.now ?? Date.now;
  const host = options.host ?? "127.0.0.1";
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  let rules: Array<FaultRule & { used: number }> = [];
  let schedule = options.schedule;
  let random = seededRandom(schedule?.seed ?? 1);
  let outage: OutageMode | undefined;
  let outageTimer: NodeJS.Timeout | undefined;
  const sockets = new Set<Socket>();

  let counters = freshCounters();
  function freshCounters() {
    return {
      total: 0,
      byRoute: {} as Record<string, number>,
      perSecond: new Map<number, number>(),
      times: [] as number[],
      timesByCredential: new Map<string, number[]>(),
      faults: {} as Record<string, number>,
      byStatus: {} as Record<string, number>,
    };
  }
  const bump = (record: Record<string, number>, key: string) => {
    record[key] = (record[key] ?? 0) + 1;
  };

  function pickFault(method: string, route: string): Fault | undefined {
    for (const rule of rules) {
      if (rule.times !== undefined && rule.used >= rule.times) continue;
      if (!matches(rule.match, method, route)) continue;
      rule.used++;
      return rule.fault;
    }
    if (schedule !== undefined && matches(schedule.match, method, route)) return chooseScheduled(schedule, random);
    return undefined;
  }

  function send(res: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}) {
    bump(counters.byStatus, String(status));
    res.writeHead(status, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  }

  function forward(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer, fault: Fault | undefined) {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port === "" ? 80 : Number(target.port),
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
        agent,
      },
      (upRes) => {
        const chunks: Buffer[] = [];
        upRes.on("data", (c: Buffer) => chunks.push(c));
        upRes.on("error", () => res.destroy());
        upRes.on("end", () => {
          const full = Buffer.concat(chunks);
          const headers = { ...upRes.headers };
          delete headers["transfer-encoding"];
          headers["content-length"] = String(full.length);
          if (fault?.kind === "reset-after-forward") {
            bump(counters.byStatus, "reset");
            res.destroy();
            return;
          }
          res.writeHead(upRes.statusCode ?? 502, headers);
          if (fault?.kind === "truncate" && full.length > 0) {
            bump(counters.byStatus, "truncated");
            res.write(full.subarray(0, Math.floor(full.length / 2)), () => res.destroy());
            return;
          }
          bump(counters.byStatus, String(upRes.statusCode ?? 502));
          res.end(full);
        });
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) send(res, 502, errorBody("internal_error", "the fault proxy could not reach the service"));
      else res.destroy();
    });
    upstream.end(body);
  }

  function record(req: http.IncomingMessage, route: string) {
    const at = now();
    counters.total++;
    bump(counters.byRoute, route);
    const second = Math.floor(at / 1000);
    counters.perSecond.set(second, (counters.perSecond.get(second) ?? 0) + 1);
    counters.times.push(at);
    const key = credentialKey(req.headers.authorization);
    let list = counters.timesByCredential.get(key);
    if (list === undefined) counters.timesByCredential.set(key, (list = []));
    list.push(at);
  }

  const server = http.createServer((req, res) => {
    const method = req.method ?? "GET";
    const route = normaliseRoute(method, req.url ?? "/");
    record(req, route);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (outage === "unavailable") {
        bump(counters.faults, "outage");
        send(res, 503, errorBody("unavailable", "the service is unavailable (injected outage)"), {
          "retry-after": "1",
        });
        return;
      }
      const fault = pickFault(method, route);
      if (fault !== undefined) bump(counters.faults, fault.kind);
      switch (fault?.kind) {
        case "rate-limit":
          send(res, 429, errorBody("rate_limited", "too many requests (injected)"), {
            "retry-after": String(fault.retryAfterSeconds),
          });
          return;
        case "server-error":
          send(
            res,
            fault.status,
            errorBody(fault.status === 503 ? "unavailable" : "internal_error", "injected server error"),
            fault.status === 503 ? { "retry-after": "1" } : {},
          );
          return;
        case "reset":
          bump(counters.byStatus, "reset");
          req.socket.destroy();
          return;
        case "slow":
          setTimeout(() => forward(req, res, body, undefined), fault.delayMs).unref();
          return;
        default:
          forward(req, res, body, fault);
      }
    });
  });
  server.keepAliveTimeout = 5_000;
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  await listen(options.port ?? 0);
  const port = (server.address() as AddressInfo).port;

  const closeListener = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });

  async function endOutage() {
    if (outageTimer !== undefined) clearTimeout(outageTimer);
    outageTimer = undefined;
    const was = outage;
    outage = undefined;
    if (was === "refuse" && !server.listening) await listen(port);
  }

  return {
    url: `http://${host}:${port}`,
    port,
    inject(rule) {
      rules.push({ ...rule, used: 0 });
    },
    clearFaults() {
      rules = [];
    },
    setSchedule(next) {
      schedule = next;
      random = seededRandom(next?.seed ?? 1);
    },
    get outage() {
      return outage;
    },
    async startOutage(mode, durationMs) {
      await endOutage();
      outage = mode;
      if (mode === "refuse") await closeListener();
      if (durationMs !== undefined) {
        outageTimer = setTimeout(() => void endOutage(), durationMs);
        outageTimer.unref();
      }
    },
    endOutage,
    stats() {
      const peakPerSecondByCredential: Record<string, number> = {};
      for (const [key, times] of counters.timesByCredential) peakPerSecondByCredential[key] = slidingPeak(times);
      return {
        total: counters.total,
        byRoute: { ...counters.byRoute },
        perSecond: new Map(counters.perSecond),
        peakPerSecond: slidingPeak(counters.times),
        peakPerSecondByCredential,
        faults: { ...counters.faults },
        byStatus: { ...counters.byStatus },
      };
    },
    resetStats() {
      counters = freshCounters();
    },
    async stop() {
      if (outageTimer !== undefined) clearTimeout(outageTimer);
      outage = undefined;
      await closeListener();
      agent.destroy();
    },
  };
}
