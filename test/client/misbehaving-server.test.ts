import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AbortedError,
  ConflictError,
  ContractViolationError,
  createClient,
  ForbiddenError,
  InternalServerError,
  InvalidRequestError,
  MethodNotAllowedError,
  PayloadTooLargeError,
  RegionUnavailableError,
  UnprocessableError,
  MdsApiError,
  NetworkError,
  NotFoundError,
  RateLimitedError,
  systemClock,
  TimeoutError,
  UnauthorizedError,
  UnavailableError,
  type ClientOptions,
  type MdsClient,
  type RequestEvent,
} from "../../src/client/index.ts";
import { newId } from "../../src/contract/index.ts";
import { scanText } from "../support/secret-scan.ts";
import {
  databaseJson,
  errorReply,
  fakeClock,
  neverAnswer,
  plantedToken,
  projectJson,
  reply,
  resetConnection,
  startScriptedServer,
  type Handler,
} from "./helpers.ts";

let server: Awaited<ReturnType<typeof startScriptedServer>>;
// Everything a test saw that a token must never reach: error inspections and log lines.
const observed: string[] = [];
const planted: string[] = [];

beforeAll(async () => {
  server = await startScriptedServer();
});

afterAll(async () => {
  await server.close();
  const findings = scanText(
    observed.join("\n"),
    planted.map((value, i) => ({ name: `token ${i}`, value })),
    "client errors and logs",
  );
  expect(findings).toEqual([]);
});

function makeClient(overrides: Partial<ClientOptions> = {}) {
  const token = plantedToken();
  planted.push(token);
  const clock = fakeClock();
  const events: RequestEvent[] = [];
  const client = createClient({
    baseUrl: server.url,
    token,
    clock,
    random: () => 0.5,
    logger: {
      debug: (obj, msg) => observed.push(JSON.stringify({ ...obj, msg })),
      warn: (obj, msg) => observed.push(JSON.stringify({ ...obj, msg })),
    },
    hooks: { onRequest: (e) => events.push(e) },
    ...overrides,
  });
  return { client, token, clock, events };
}

async function failure(promise: Promise<unknown>): Promise<MdsApiError> {
  try {
    await promise;
  } catch (error) {
    observed.push(inspect(error, { depth: 6 }));
    if (error instanceof MdsApiError) return error;
    throw new Error(`expected an MdsApiError, got ${inspect(error)}`);
  }
  throw new Error("expected the call to fail");
}

const dbId = newId("database");

describe("responses", () => {
  it("unwraps data and tolerates unknown extra fields", async () => {
    const token = plantedToken();
    planted.push(token);
    // A token from a Secret often ends with a newline.
    const client = createClient({ baseUrl: server.url, token: `${token}\n`, clock: fakeClock() });
    const body = databaseJson({ id: dbId, somethingNew: { nested: true } });
    server.script([reply(200, { data: body, alsoNew: 1 })]);
    const db = await client.getDatabase(dbId);
    expect(db.id).toBe(dbId);
    expect(db.connections[0]?.endpoints.pooled?.port).toBe(6432);
    const [request] = server.requests;
    expect(request?.method).toBe("GET");
    expect(request?.url).toBe(`/v1/databases/${dbId}`);
    expect(request?.headers.authorization).toBe(`Bearer ${token}`);
    expect(request?.headers["x-request-id"]).toBeTruthy();
  });

  it("reports malformed JSON as contract_violation, without retrying", async () => {
    const { client } = makeClient();
    server.script([(_req, res) => res.writeHead(200, { "content-type": "application/json" }).end("{ not json")]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(ContractViolationError);
    expect(error.code).toBe("contract_violation");
    expect(error.retryable).toBe(false);
    expect(error.message).toBe(
      `cannot get database "${dbId}": contract_violation: HTTP 200 with a body that is not JSON`,
    );
    expect(server.requests).toHaveLength(1);
  });

  it("reports a missing or mistyped field as contract_violation naming its path", async () => {
    const { client } = makeClient();
    const { status: _dropped, ...withoutStatus } = databaseJson({ id: dbId });
    server.script([reply(200, { data: withoutStatus }), reply(200, { data: databaseJson({ isDefault: "yes" }) })]);
    const missing = await failure(client.getDatabase(dbId));
    expect(missing).toBeInstanceOf(ContractViolationError);
    expect(missing.message).toContain("data.status");
    const mistyped = await failure(client.getDatabase(dbId));
    expect(mistyped.message).toContain("data.isDefault");
  });

  it("maps error bodies to typed errors with status, hint and request id", async () => {
    const { client } = makeClient();
    server.script([
      errorReply(404, "not_found", `database "${dbId}" not found`, { "x-request-id": "req-1" }, "check the id"),
    ]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({
      status: 404,
      code: "not_found",
      hint: "check the id",
      requestId: "req-1",
      retryable: false,
    });
    expect(error.message).toBe(`cannot get database "${dbId}": not_found: database "${dbId}" not found`);
  });

  it("parses the existing id out of a logicalId conflict", async () => {
    const { client } = makeClient();
    const existing = newId("project");
    server.script([errorReply(409, "conflict", `logicalId "k8s:a:ns/shop" is already used by project "${existing}"`)]);
    const error = await failure(client.createProject({ name: "shop", logicalId: "k8s:a:ns/shop" }));
    expect(error).toBeInstanceOf(ConflictError);
    expect(error instanceof ConflictError && error.existingId).toBe(existing);
  });

  it("finds the holder's id in the hint, not inside the logicalId sent", async () => {
    const { client } = makeClient();
    const holder = newId("database");
    const logicalId = `k8s:x:ns/${newId("database")}`;
    server.script([
      errorReply(
        409,
        "conflict",
        `logicalId "${logicalId}" already used by database "${holder}"`,
        {},
        `existing database id: ${holder}`,
      ),
    ]);
    const error = await failure(client.createDatabase({ projectId: newId("project"), logicalId }));
    expect(error instanceof ConflictError && error.existingId).toBe(holder);
  });

  it("maps every contract error row to its class", async () => {
    const { client } = makeClient({ retry: { maxAttempts: 1 } });
    const rows: [number, string, new (...args: never[]) => MdsApiError][] = [
      [400, "invalid_request", InvalidRequestError],
      [401, "unauthorized", UnauthorizedError],
      [403, "forbidden", ForbiddenError],
      [404, "not_found", NotFoundError],
      [405, "method_not_allowed", MethodNotAllowedError],
      [409, "conflict", ConflictError],
      [413, "payload_too_large", PayloadTooLargeError],
      [422, "unprocessable", UnprocessableError],
      [422, "region_unavailable", RegionUnavailableError],
      [429, "rate_limited", RateLimitedError],
      [500, "internal_error", InternalServerError],
      [503, "unavailable", UnavailableError],
    ];
    server.script(rows.map(([status, code]) => errorReply(status, code, "scripted")));
    for (const [status, code, cls] of rows) {
      const error = await failure(client.getProject(newId("project")));
      expect(error).toBeInstanceOf(cls);
      expect(error).toMatchObject({ status, code, retryable: [429, 500, 503].includes(status) });
    }
    expect(server.requests).toHaveLength(rows.length);
    // A code we do not know (the public API does not enumerate its codes) is read by its status; the message keeps it.
    server.script([
      errorReply(418, "teapot_reached", "scripted"),
      errorReply(403, "P6001", "Cannot delete the default environment"),
    ]);
    expect(await failure(client.getProject(newId("project")))).toMatchObject({ status: 418, code: "invalid_request" });
    const forbidden = await failure(client.getProject(newId("project")));
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect(forbidden.message).toContain("Cannot delete the default environment (P6001)");
  });

  it("gives a proxy's non-JSON 502 the code its status implies", async () => {
    const { client } = makeClient({ retry: { maxAttempts: 1 } });
    server.script([(_req, res) => res.writeHead(502, { "content-type": "text/html" }).end("<html>bad gateway</html>")]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toMatchObject({ status: 502, code: "internal_error", retryable: true });
  });

  it("refuses bad input before sending anything, naming the field", async () => {
    const { client } = makeClient();
    server.script([]);
    const error = await failure(client.createProjectDatabase(newId("project"), { name: "" }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error.message).toMatch(/^cannot create database "" in project "proj_[a-z0-9]+": invalid_request: name: /);
    expect(server.requests).toHaveLength(0);
  });

  it("refuses an idempotency key the service would refuse, before sending", async () => {
    const { client } = makeClient();
    server.script([]);
    for (const key of ["", "has space", "x".repeat(256), "line\nbreak"]) {
      const error = await failure(client.createProject({ name: "shop" }, { idempotencyKey: key }));
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect(error.message).toBe(
        'cannot create project "shop": invalid_request: idempotencyKey must be 1-255 printable ASCII characters without spaces',
      );
    }
    expect(server.requests).toHaveLength(0);
  });

  it("never puts the token or a connection string into an error message", async () => {
    const { client, token } = makeClient();
    server.script([
      errorReply(400, "invalid_request", `bad token ${token} for postgresql://u:p4ss@h:5432/d`, {}, `try ${token}`),
    ]);
    const error = await failure(client.getDatabase(dbId));
    expect(error.message).not.toContain(token);
    expect(error.message).not.toContain("p4ss");
    expect(error.hint).not.toContain(token);
  });
});

describe("retries", () => {
  it("retries a GET on 503 twice, then succeeds, with jittered backoff", async () => {
    const { client, clock, events } = makeClient();
    server.script([
      errorReply(503, "unavailable", "down"),
      errorReply(503, "unavailable", "down"),
      reply(200, { data: databaseJson({ id: dbId }) }),
    ]);
    expect((await client.getDatabase(dbId)).id).toBe(dbId);
    expect(server.requests).toHaveLength(3);
    // Full jitter with random() = 0.5: half of 500 ms, then half of 1 s.
    expect(clock.sleeps).toEqual([250, 500]);
    expect(events.at(-1)).toMatchObject({ operation: "getDatabase", outcome: "ok", attempts: 3, status: 200 });
  });

  it("honours Retry-After in seconds on 429", async () => {
    const { client, clock } = makeClient();
    server.script([
      errorReply(429, "rate_limited", "slow down", { "retry-after": "7" }),
      reply(200, { data: databaseJson({ id: dbId }) }),
    ]);
    const started = clock.now();
    await client.getDatabase(dbId);
    expect(clock.now() - started).toBeGreaterThanOrEqual(7000);
    expect(server.requests).toHaveLength(2);
  });

  it("pauses every client of the credential after a 429", async () => {
    const { client, token, clock } = makeClient({ retry: { maxAttempts: 1 } });
    const throttled: number[] = [];
    const other = createClient({
      baseUrl: server.url,
      token,
      clock,
      hooks: { onThrottled: (e) => throttled.push(e.waitedMs) },
    });
    server.script([
      errorReply(429, "rate_limited", "slow down", { "retry-after": "7" }),
      reply(200, { data: databaseJson({ id: dbId }) }),
    ]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(RateLimitedError);
    expect(error.retryAfterMs).toBe(7000);
    const started = clock.now();
    await other.getDatabase(dbId);
    expect(clock.now() - started).toBeGreaterThanOrEqual(7000);
    expect(throttled).toEqual([7000]);
  });

  it("honours Retry-After as an HTTP date", async () => {
    const { client, clock } = makeClient();
    const at = new Date(clock.now() + 12_000).toUTCString();
    server.script([
      errorReply(503, "unavailable", "no database server", { "retry-after": at }),
      reply(200, { data: databaseJson({ id: dbId }) }),
    ]);
    await client.getDatabase(dbId);
    expect(clock.sleeps).toEqual([12_000]);
  });

  it("gives up at once when Retry-After is beyond the total time bound", async () => {
    const { client } = makeClient({ retry: { maxElapsedMs: 10_000 } });
    server.script([errorReply(429, "rate_limited", "slow down", { "retry-after": "3600" })]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(RateLimitedError);
    expect(error.retryAfterMs).toBe(3_600_000);
    expect(server.requests).toHaveLength(1);
  });

  it("stops after maxAttempts", async () => {
    const { client } = makeClient({ retry: { maxAttempts: 3 } });
    server.script([], errorReply(500, "internal_error", "boom"));
    const error = await failure(client.listDatabases());
    expect(error.code).toBe("internal_error");
    expect(server.requests).toHaveLength(3);
  });

  it("retries after a connection reset", async () => {
    const { client } = makeClient();
    server.script([resetConnection, reply(200, { data: databaseJson({ id: dbId }) })]);
    expect((await client.getDatabase(dbId)).id).toBe(dbId);
    expect(server.requests).toHaveLength(2);
  });

  it("ends a response that never comes after timeoutMs per attempt", async () => {
    const { client } = makeClient({ timeoutMs: 150, retry: { maxAttempts: 2 } });
    server.script([neverAnswer, neverAnswer]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error.message).toBe(`cannot get database "${dbId}": timeout: no complete response within 150 ms`);
    expect(server.requests).toHaveLength(2);
  });

  it("ends a body that stalls halfway after timeoutMs", async () => {
    const { client } = makeClient({ timeoutMs: 150, retry: { maxAttempts: 1 } });
    server.script([
      (_req, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
        res.write('{"data": {');
      },
    ]);
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(TimeoutError);
  });

  it("never retries a POST without an Idempotency-Key", async () => {
    const { client } = makeClient();
    server.script([errorReply(503, "unavailable", "down")], resetConnection);
    const unavailable = await failure(client.createProject({ name: "shop" }));
    expect(unavailable).toBeInstanceOf(UnavailableError);
    expect(server.requests).toHaveLength(1);
    server.script([], resetConnection);
    const reset = await failure(client.createBackup(dbId));
    expect(reset).toBeInstanceOf(NetworkError);
    expect(reset.retryable).toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it("retries a POST with an Idempotency-Key to a server that announced replay, sending the same key", async () => {
    const { client } = makeClient();
    const created = { ...projectJson(), database: null };
    server.script([reply(200, { data: projectJson() }, { "x-idempotency-replay": "86400" })]);
    await client.getProject(newId("project"));
    server.script([resetConnection, errorReply(503, "unavailable", "down"), reply(201, { data: created })]);
    const project = await client.createProject(
      { name: "shop", createDatabase: false },
      { idempotencyKey: "k8s:abc:ns/shop" },
    );
    expect(project.database).toBeNull();
    expect(server.requests.map((r) => r.headers["idempotency-key"])).toEqual([
      "k8s:abc:ns/shop",
      "k8s:abc:ns/shop",
      "k8s:abc:ns/shop",
    ]);
    expect(new Set(server.requests.map((r) => r.body)).size).toBe(1);
    expect(JSON.parse(server.requests[0]?.body ?? "")).toEqual({ name: "shop", createDatabase: false });
  });

  it("stops at once when the caller aborts", async () => {
    const { client } = makeClient({ timeoutMs: 60_000 });
    const controller = new AbortController();
    server.script([(_req) => controller.abort(new Error("shutting down"))]);
    const error = await failure(client.getDatabase(dbId, { signal: controller.signal }));
    expect(error).toBeInstanceOf(AbortedError);
    expect(error.code).toBe("aborted");
    expect(server.requests).toHaveLength(1);
    // An aborted signal sends nothing.
    server.script([]);
    expect(await failure(client.getDatabase(dbId, { signal: controller.signal }))).toBeInstanceOf(AbortedError);
    expect(server.requests).toHaveLength(0);
  });
});

describe("more failures", () => {
  it("retries a refused connection, then reports network_error", async () => {
    const closed = await startScriptedServer();
    const url = closed.url;
    await closed.close();
    const token = plantedToken();
    planted.push(token);
    const clock = fakeClock();
    const attempts: string[] = [];
    const client = createClient({
      baseUrl: url,
      token,
      clock,
      retry: { maxAttempts: 3 },
      hooks: { onAttempt: (e) => attempts.push(e.outcome) },
    });
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(NetworkError);
    expect(error.message).toBe(`cannot get database "${dbId}": network_error: ECONNREFUSED`);
    expect(attempts).toEqual(["network_error", "network_error", "network_error"]);
    expect(clock.sleeps).toHaveLength(2);
  });

  it("stops a long Retry-After wait when the caller aborts", async () => {
    // The system clock: the 30 s wait is real, and only the abort can end it before the test times out.
    const controller = new AbortController();
    const { client } = makeClient({
      clock: systemClock,
      rateLimit: false,
      hooks: { onRetry: () => setImmediate(() => controller.abort(new Error("shutting down"))) },
    });
    server.script([errorReply(503, "unavailable", "down", { "retry-after": "30" })]);
    const error = await failure(client.getDatabase(dbId, { signal: controller.signal }));
    expect(error).toBeInstanceOf(AbortedError);
    expect(error.cause).toEqual(new Error("shutting down"));
    expect(server.requests).toHaveLength(1);
  });
});

describe("pagination", () => {
  it("walks every page with the cursor and keeps the filters", async () => {
    const { client } = makeClient();
    const projectId = newId("project");
    const pages: Handler[] = [
      reply(200, { data: [databaseJson(), databaseJson()], pagination: { hasMore: true, nextCursor: "c1" } }),
      reply(200, { data: [databaseJson()], pagination: { hasMore: true, nextCursor: "c2" } }),
      reply(200, { data: [databaseJson()], pagination: { hasMore: false, nextCursor: null } }),
    ];
    server.script(pages);
    const ids: string[] = [];
    for await (const db of client.iterateDatabases({ projectId, limit: 2 })) ids.push(db.id);
    expect(ids).toHaveLength(4);
    expect(server.requests.map((r) => r.url)).toEqual([
      `/v1/databases?projectId=${projectId}&limit=2`,
      `/v1/databases?projectId=${projectId}&limit=2&cursor=c1`,
      `/v1/databases?projectId=${projectId}&limit=2&cursor=c2`,
    ]);
  });

  it("refuses a page walk that would never end", async () => {
    const { client } = makeClient();
    server.script([], reply(200, { data: [projectJson()], pagination: { hasMore: true, nextCursor: "same" } }));
    const walk = async () => {
      for await (const _project of client.iterateProjects()) {
        // drain
      }
    };
    expect(await failure(walk())).toBeInstanceOf(ContractViolationError);
  });
});

describe("credentials", () => {
  it("re-reads a token file that changes between calls", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mds-client-"));
    const file = join(dir, "token");
    const first = plantedToken();
    const second = plantedToken();
    planted.push(first, second);
    await writeFile(file, `${first}\n`);
    const client = createClient({ baseUrl: server.url, tokenFile: file, clock: fakeClock() });
    server.script([], reply(200, { data: databaseJson({ id: dbId }) }));
    await client.getDatabase(dbId);
    // Kubernetes replaces a mounted Secret by swapping a symlink; a rename is the same kind of change.
    await writeFile(`${file}.new`, second);
    await rename(`${file}.new`, file);
    await client.getDatabase(dbId);
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${first}`, `Bearer ${second}`]);
    await rm(dir, { recursive: true });
  });

  it("re-reads the token file after a 401 and retries once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mds-client-"));
    const file = join(dir, "token");
    const first = plantedToken();
    const second = plantedToken();
    planted.push(first, second);
    await writeFile(file, first);
    const client = createClient({ baseUrl: server.url, tokenFile: file, clock: fakeClock() });
    server.script([
      (req, res) => {
        // The token is rotated while the request is in flight; the 401 makes the client read the file again.
        void writeFile(file, second).then(() => errorReply(401, "unauthorized", "token revoked")(req, res));
      },
      reply(200, { data: databaseJson({ id: dbId }) }),
    ]);
    await client.getDatabase(dbId);
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${first}`, `Bearer ${second}`]);
    await rm(dir, { recursive: true });
  });

  it("fails with unauthorized when a refreshed OAuth token is refused too", async () => {
    let issued = 0;
    const tokens = [plantedToken(), plantedToken()];
    planted.push(...tokens);
    server.script([], (req, res) => {
      if (req.url === "/oauth/token") {
        const access = tokens[issued++];
        reply(200, {
          access_token: access,
          token_type: "Bearer",
          expires_in: 3600,
          refresh_token: `refresh-${issued}`,
          scope: "",
        })(req, res);
        return;
      }
      errorReply(401, "unauthorized", "workspace suspended")(req, res);
    });
    const client = createClient({
      baseUrl: server.url,
      oauth: {
        tokenUrl: `${server.url}/oauth/token`,
        clientId: "operator",
        refreshToken: "refresh-0",
        onRefreshToken: () => undefined,
      },
      clock: fakeClock(),
      rateLimit: false,
    });
    const error = await failure(client.getDatabase(dbId));
    expect(error).toBeInstanceOf(UnauthorizedError);
    expect(server.requests.map((r) => r.url)).toEqual([
      "/oauth/token",
      `/v1/databases/${dbId}`,
      "/oauth/token",
      `/v1/databases/${dbId}`,
    ]);
  });

  it("fails with unauthorized when the token is refused twice", async () => {
    const { client } = makeClient();
    server.script([], errorReply(401, "unauthorized", "unknown token"));
    const error = await failure(client.createProject({ name: "shop" }));
    expect(error).toBeInstanceOf(UnauthorizedError);
    expect(error.message).toBe('cannot create project "shop": unauthorized: unknown token');
    // A static token cannot be renewed: one attempt only.
    expect(server.requests).toHaveLength(1);
  });

  describe("OAuth", () => {
    function oauthScript(accessTokens: string[], refreshTokens: string[]) {
      let issued = 0;
      const handler: Handler = (req, res) => {
        if (req.url === "/oauth/token") {
          const form = new URLSearchParams(req.body);
          const expected = issued === 0 ? "refresh-0" : refreshTokens[issued - 1];
          if (
            form.get("grant_type") !== "refresh_token" ||
            form.get("refresh_token") !== expected ||
            form.get("client_id") !== "operator"
          ) {
            reply(400, { error: "invalid_grant", error_description: "refresh token is not valid" })(req, res);
            return;
          }
          const access = accessTokens[issued];
          const refresh = refreshTokens[issued];
          issued += 1;
          reply(200, {
            access_token: access,
            token_type: "Bearer",
            expires_in: 3600,
            refresh_token: refresh,
            scope: "workspace:admin offline_access",
          })(req, res);
          return;
        }
        const current = accessTokens[issued - 1];
        if (req.headers.authorization !== `Bearer ${current}`) {
          errorReply(401, "unauthorized", "expired token")(req, res);
          return;
        }
        reply(200, { data: databaseJson({ id: dbId }) })(req, res);
      };
      return handler;
    }

    it("refreshes once for concurrent callers, and hands over the rotated refresh token", async () => {
      const access = [plantedToken(), plantedToken()];
      planted.push(...access);
      const rotated: string[] = [];
      server.script([], oauthScript(access, ["refresh-1", "refresh-2"]));
      const clock = fakeClock();
      const client = createClient({
        baseUrl: server.url,
        oauth: {
          tokenUrl: `${server.url}/oauth/token`,
          clientId: "operator",
          refreshToken: "refresh-0",
          onRefreshToken: (t) => void rotated.push(t),
        },
        clock,
        rateLimit: false,
      });
      await Promise.all(Array.from({ length: 5 }, () => client.getDatabase(dbId)));
      expect(server.requests.filter((r) => r.url === "/oauth/token")).toHaveLength(1);
      expect(rotated).toEqual(["refresh-1"]);
      // Near expiry the token is refreshed before use, again once.
      clock.advance(3_590_000);
      await Promise.all(Array.from({ length: 3 }, () => client.getDatabase(dbId)));
      expect(server.requests.filter((r) => r.url === "/oauth/token")).toHaveLength(2);
      expect(rotated).toEqual(["refresh-1", "refresh-2"]);
      expect(
        server.requests.filter((r) => r.url !== "/oauth/token").every((r) => r.headers.authorization !== undefined),
      ).toBe(true);
    });

    it("on a 401, refreshes once and retries once", async () => {
      const access = [plantedToken(), plantedToken()];
      planted.push(...access);
      const rotated: string[] = [];
      const script = oauthScript(access, ["refresh-1", "refresh-2"]);
      let revoked = false;
      server.script([], (req, res) => {
        // The service revokes the first access token after one use.
        if (!revoked && req.url !== "/oauth/token" && req.headers.authorization === `Bearer ${access[0]}`) {
          revoked = true;
          errorReply(401, "unauthorized", "token revoked")(req, res);
          return;
        }
        script(req, res);
      });
      const client = createClient({
        baseUrl: server.url,
        oauth: {
          tokenUrl: `${server.url}/oauth/token`,
          clientId: "operator",
          refreshToken: "refresh-0",
          onRefreshToken: (t) => void rotated.push(t),
        },
        clock: fakeClock(),
        rateLimit: false,
      });
      await client.getDatabase(dbId);
      expect(server.requests.map((r) => r.url)).toEqual([
        "/oauth/token",
        `/v1/databases/${dbId}`,
        "/oauth/token",
        `/v1/databases/${dbId}`,
      ]);
      expect(rotated).toEqual(["refresh-1", "refresh-2"]);
    });

    it("lets a caller stop waiting for a shared refresh, which goes on for the others", async () => {
      const access = plantedToken();
      planted.push(access);
      let answerTokenRequest: (() => void) | undefined;
      const controller = new AbortController();
      server.script([], (req, res) => {
        if (req.url === "/oauth/token") {
          // Hold the refresh until the first caller has given up.
          answerTokenRequest = () =>
            reply(200, {
              access_token: access,
              token_type: "Bearer",
              expires_in: 3600,
              refresh_token: "refresh-1",
              scope: "",
            })(req, res);
          controller.abort(new Error("reconcile cancelled"));
          return;
        }
        reply(200, { data: databaseJson({ id: dbId }) })(req, res);
      });
      const client = createClient({
        baseUrl: server.url,
        oauth: {
          tokenUrl: `${server.url}/oauth/token`,
          clientId: "operator",
          refreshToken: "refresh-0",
          onRefreshToken: () => undefined,
        },
        clock: fakeClock(),
        rateLimit: false,
      });
      const first = client.getDatabase(dbId, { signal: controller.signal });
      const second = client.getDatabase(dbId);
      expect(await failure(first)).toBeInstanceOf(AbortedError);
      answerTokenRequest?.();
      expect((await second).id).toBe(dbId);
      expect(server.requests.filter((r) => r.url === "/oauth/token")).toHaveLength(1);
    });

    it("fails the call when onRefreshToken rejects, and keeps the new token", async () => {
      const access = plantedToken();
      planted.push(access);
      server.script([], (req, res) => {
        if (req.url === "/oauth/token") {
          reply(200, {
            access_token: access,
            token_type: "Bearer",
            expires_in: 3600,
            refresh_token: "refresh-1",
            scope: "",
          })(req, res);
          return;
        }
        reply(200, { data: databaseJson({ id: dbId }) })(req, res);
      });
      const client = createClient({
        baseUrl: server.url,
        oauth: {
          tokenUrl: `${server.url}/oauth/token`,
          clientId: "operator",
          refreshToken: "refresh-0",
          onRefreshToken: () => Promise.reject(new Error("cannot write Secret")),
        },
        clock: fakeClock(),
        rateLimit: false,
      });
      const error = await failure(client.getDatabase(dbId));
      expect(error).toMatchObject({ code: "internal_error", retryable: true });
      expect(error.message).toBe(
        "cannot refresh the access token: internal_error: onRefreshToken failed: cannot write Secret",
      );
      expect((await client.getDatabase(dbId)).id).toBe(dbId);
      expect(server.requests.filter((r) => r.url === "/oauth/token")).toHaveLength(1);
    });

    it("fails with unauthorized when the refresh token is refused", async () => {
      server.script([], (req, res) =>
        reply(400, { error: "invalid_grant", error_description: "refresh token reused" })(req, res),
      );
      const client = createClient({
        baseUrl: server.url,
        oauth: {
          tokenUrl: `${server.url}/oauth/token`,
          clientId: "operator",
          refreshToken: "spent-refresh-token",
          onRefreshToken: () => undefined,
        },
        clock: fakeClock(),
      });
      const error = await failure(client.getDatabase(dbId));
      expect(error).toBeInstanceOf(UnauthorizedError);
      expect(error.message).toBe("cannot refresh the access token: unauthorized: invalid_grant: refresh token reused");
      expect(error.message).not.toContain("spent-refresh-token");
    });
  });
});

describe("options", () => {
  it("ignores a hook that throws", async () => {
    const { client } = makeClient({
      hooks: {
        onRequest: () => {
          throw new Error("broken metrics");
        },
        onAttempt: () => {
          throw new Error("broken metrics");
        },
      },
    });
    server.script([reply(200, { data: databaseJson({ id: dbId }) })]);
    expect((await client.getDatabase(dbId)).id).toBe(dbId);
  });

  it("rejects unusable options with a clear message", () => {
    const token = plantedToken();
    planted.push(token);
    const cases: [Partial<ClientOptions>, string][] = [
      [{ baseUrl: "not a url", token }, "invalid client option baseUrl: not a URL"],
      [
        { baseUrl: "http://x", token, tokenFile: "/t" },
        "invalid client options: give exactly one of token, tokenFile, oauth",
      ],
      [{ baseUrl: "http://x" }, "invalid client options: give exactly one of token, tokenFile, oauth"],
      [{ baseUrl: "http://x", token, timeoutMs: 0 }, "invalid client option timeoutMs: 0"],
      [{ baseUrl: "http://x", token, retry: { maxAttempts: 0 } }, "invalid client option retry.maxAttempts: 0"],
      [
        { baseUrl: "http://x", token: `${token} ${token}` },
        "invalid client option token: must be non-empty without whitespace",
      ],
      [{ baseUrl: "http://x", token: " \n" }, "invalid client option token: must be non-empty without whitespace"],
      [
        { baseUrl: "http://x", token, rateLimit: { requestsPerSecond: -1 } },
        "invalid client option rateLimit.requestsPerSecond: -1",
      ],
      [{ baseUrl: "ftp://x", token }, "invalid client option baseUrl: must be http or https"],
      [{ baseUrl: "http://user:pw@x", token }, "invalid client option baseUrl: must not carry credentials"],
    ];
    for (const [options, message] of cases) {
      let thrown: unknown;
      try {
        createClient({ baseUrl: "", ...options } as ClientOptions);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(TypeError);
      expect((thrown as Error).message).toBe(message);
      observed.push(inspect(thrown));
    }
  });
});

export type { MdsClient };
