import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorBody, OAuthTokenResponse } from "../../src/contract/index.ts";
import { startService, type RunningService } from "../../src/service/index.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, sql, type Json } from "./helpers.ts";

// Every error row of docs/decisions.md#errors, bad input that changes nothing, auth and OAuth, and logs that never hold a secret.

const logLines: string[] = [];
const capture = new Writable({
  write(chunk: Buffer, _enc, done) {
    logLines.push(...chunk.toString().split("\n").filter(Boolean));
    done();
  },
});

let service: TestService;
let api: ReturnType<typeof client>;
let project: Json;
let database: Json;

function expectError(res: { status: number; body: Json }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(ErrorBody.parse(res.body).error.code).toBe(code);
  expect(res.body.error.message.length).toBeGreaterThan(0);
  expect(JSON.stringify(res.body)).not.toMatch(/at .*\.ts:\d+|SELECT |INSERT /);
}

async function counts(): Promise<string> {
  const rows = await sql(
    service.controlUrl,
    `SELECT (SELECT count(*) FROM projects) p, (SELECT count(*) FROM databases) d, (SELECT count(*) FROM connections) c,
    (SELECT count(*) FROM backups) b, (SELECT count(*) FROM jobs) j, (SELECT count(*) FROM idempotency) i, (SELECT count(*) FROM tokens) t`,
  );
  return JSON.stringify(rows);
}

beforeAll(async () => {
  service = await startTestService({ logger: pino({ level: "trace" }, capture) });
  api = client(service, service.token);
  project = (await api("POST", "/v1/projects", { name: "errors" })).body.data;
  database = project.database;
  await eventually(async () =>
    expect((await api("GET", `/v1/databases/${database.id}`)).body.data.status).toBe("ready"),
  );
});
afterAll(async () => {
  await service?.stop();
});

describe("bad input is a clear 400 and changes nothing", () => {
  const bad: [string, string, string, unknown, Record<string, string> | undefined][] = [
    ["malformed JSON", "POST", "/v1/projects", "{not json", undefined],
    ["a JSON array", "POST", "/v1/projects", "[]", undefined],
    ["a JSON string", "POST", "/v1/projects", '"x"', undefined],
    ["wrong content type", "POST", "/v1/projects", "name=x", { "content-type": "application/x-www-form-urlencoded" }],
    [
      "text/plain JSON",
      "POST",
      "/v1/databases",
      '{"projectId":"proj_c000000000000000000000000"}',
      { "content-type": "text/plain" },
    ],
    ["unknown field", "POST", "/v1/projects", { name: "x", nmae: "typo" }, undefined],
    ["wrong-typed field", "POST", "/v1/projects", { name: 5 }, undefined],
    ["empty name", "POST", "/v1/projects", { name: "   " }, undefined],
    ["control characters in name", "POST", "/v1/projects", { name: "a\u0007b" }, undefined],
    ["bad logicalId", "POST", "/v1/projects", { logicalId: "has space" }, undefined],
    ["unknown region", "POST", "/v1/projects", { region: "mars-1" }, undefined],
    ["missing projectId", "POST", "/v1/databases", {}, undefined],
    ["projectId off the pattern", "POST", "/v1/databases", { projectId: "proj-bad id" }, undefined],
    [
      "unknown source type",
      "POST",
      "/v1/databases",
      { projectId: "proj_c000000000000000000000000", source: { type: "snapshot" } },
      undefined,
    ],
    ["path id off the pattern", "GET", "/v1/databases/db-not-valid", undefined, undefined],
    ["project path id off the pattern", "GET", "/v1/projects/has-dash/databases", undefined, undefined],
    ["isDefault false in PATCH", "PATCH", "/v1/databases/DBID", { isDefault: false }, undefined],
    ["unknown PATCH field", "PATCH", "/v1/databases/DBID", { status: "ready" }, undefined],
    ["restore without source", "POST", "/v1/databases/DBID/restore", {}, undefined],
    ["connection without name", "POST", "/v1/databases/DBID/connections", {}, undefined],
    ["bad Idempotency-Key", "POST", "/v1/projects", { name: "x" }, { "idempotency-key": "has space" }],
  ];
  it.each(bad)("%s", async (_what, method, path, body, headers) => {
    const before = await counts();
    const res = await api(method, path.replace("DBID", database.id), body, headers ?? {});
    expectError(res, 400, "invalid_request");
    expect(await counts()).toBe(before);
  });

  it("names the unknown field", async () => {
    const res = await api("POST", "/v1/projects", { name: "x", nmae: "typo" });
    expect(res.body.error.message).toContain('"nmae"');
  });

  it("a path id off the pattern shows the pattern in the hint", async () => {
    const res = await api("GET", "/v1/databases/db-not-valid");
    expect(res.body.error.hint).toContain("^(db_)?");
  });

  it("a body over 64 KiB is 413 and changes nothing", async () => {
    const before = await counts();
    expectError(
      await api("POST", "/v1/projects", { name: "x", logicalId: "a".repeat(70 * 1024) }),
      413,
      "payload_too_large",
    );
    expect(await counts()).toBe(before);
  });
});

describe("routing", () => {
  it("unknown route: 404 with the error body", async () => {
    expectError(await api("GET", "/v1/nothing-here"), 404, "not_found");
    expectError(await api("GET", "/v2/databases"), 404, "not_found");
  });

  it("known path, wrong method: 405 with Allow", async () => {
    const res = await api("PUT", `/v1/databases/${database.id}`, {});
    expectError(res, 405, "method_not_allowed");
    expect(res.headers.get("allow")?.split(", ").sort()).toEqual(["DELETE", "GET", "PATCH"]);
  });

  it("echoes X-Request-Id or makes one", async () => {
    const given = await fetch(`${service.url}/v1/databases`, {
      headers: { authorization: `Bearer ${service.token}`, "x-request-id": "req-123" },
    });
    expect(given.headers.get("x-request-id")).toBe("req-123");
    const made = await fetch(`${service.url}/v1/databases`, { headers: { authorization: `Bearer ${service.token}` } });
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("health, readiness and metrics need no token", async () => {
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(metrics).toContain("mds_http_requests_total");
  });
});

describe("not found, conflict, unprocessable", () => {
  it("unknown ids are 404", async () => {
    expectError(await api("GET", "/v1/databases/db_c000000000000000000000000"), 404, "not_found");
    expectError(await api("GET", "/v1/projects/proj_c000000000000000000000000"), 404, "not_found");
    expectError(await api("GET", "/v1/projects/proj_c000000000000000000000000/databases"), 404, "not_found");
    expectError(await api("POST", "/v1/projects/proj_c000000000000000000000000/databases", {}), 404, "not_found");
    expectError(await api("POST", "/v1/databases", { projectId: "proj_c000000000000000000000000" }), 404, "not_found");
    expectError(await api("PATCH", "/v1/databases/db_c000000000000000000000000", {}), 404, "not_found");
    expectError(await api("DELETE", "/v1/databases/db_c000000000000000000000000"), 404, "not_found");
    expectError(await api("DELETE", "/v1/connections/con_c000000000000000000000000"), 404, "not_found");
    expectError(await api("GET", "/v1/databases/db_c000000000000000000000000/backups"), 404, "not_found");
    expectError(
      await api("POST", "/v1/databases/db_c000000000000000000000000/restore", {
        source: { type: "backup", databaseId: database.id, backupId: "bkp_c000000000000000000000000" },
      }),
      404,
      "not_found",
    );
  });

  it("another workspace's objects are 404, never 403, and invisible in lists", async () => {
    const other = client(service, await service.createToken("someone-else"));
    expectError(await other("GET", `/v1/databases/${database.id}`), 404, "not_found");
    expectError(await other("GET", `/v1/projects/${project.id}`), 404, "not_found");
    expectError(await other("PATCH", `/v1/databases/${database.id}`, { name: "stolen" }), 404, "not_found");
    expectError(await other("DELETE", `/v1/databases/${database.id}`), 404, "not_found");
    expectError(await other("POST", `/v1/databases/${database.id}/connections`, { name: "x" }), 404, "not_found");
    expectError(await other("POST", "/v1/databases", { projectId: project.id }), 404, "not_found");
    expect((await other("GET", "/v1/databases")).body.data).toEqual([]);
    expect((await other("GET", `/v1/databases?projectId=${project.id}`)).body.data).toEqual([]);
    expectError(await other("POST", "/v1/projects", { workspaceId: project.workspace.id }), 404, "not_found");
    expect((await api("GET", `/v1/databases/${database.id}`)).body.data.name).toBe("errors");
  });

  it("a region without a server is 422 region_unavailable", async () => {
    // A second replica over the same control database that serves only one region.
    let replica: RunningService | undefined;
    try {
      replica = await startService({
        controlUrl: service.controlUrl,
        regions: { "us-east-1": { adminUrl: service.postgresUrl } },
        encryptionKey: Buffer.alloc(32, 1),
        backupDir: `${service.dir}/backups`,
        logger: pino({ level: "silent" }),
        spareDatabases: 0,
      });
      const r = client({ url: replica.url }, service.token);
      expectError(await r("POST", "/v1/projects", { region: "eu-west-3" }), 422, "region_unavailable");
      expectError(
        await r("POST", `/v1/projects/${project.id}/databases`, { region: "ap-southeast-1" }),
        422,
        "region_unavailable",
      );
    } finally {
      await replica?.stop();
    }
  });
});

describe("unexpected errors", () => {
  it("are 500 internal_error without SQL or stack, and the log has the request id", async () => {
    // Break the control schema under the running service for one request.
    await sql(service.controlUrl, "ALTER TABLE backups RENAME COLUMN sha256 TO sha256_broken");
    try {
      const res = await api("GET", `/v1/databases/${database.id}/backups`, undefined, {
        "x-request-id": "req-broken-1",
      });
      expectError(res, 500, "internal_error");
      expect(res.body.error.message).toBe("internal error");
      expect(res.body.error.hint).toContain("req-broken-1");
      expect(JSON.stringify(res.body)).not.toMatch(/sha256|column|backups/);
      expect(logLines.some((l) => l.includes("req-broken-1") && l.includes("request failed"))).toBe(true);
    } finally {
      await sql(service.controlUrl, "ALTER TABLE backups RENAME COLUMN sha256_broken TO sha256");
    }
    expect((await api("GET", `/v1/databases/${database.id}/backups`)).status).toBe(200);
  });
});

describe("authentication", () => {
  it("missing, malformed, unknown and revoked tokens are 401", async () => {
    expectError(await client(service, "")("GET", "/v1/databases"), 401, "unauthorized");
    const raw = await fetch(`${service.url}/v1/databases`, { headers: { authorization: "Basic abc" } });
    expectError({ status: raw.status, body: await raw.json() }, 401, "unauthorized");
    const none = await fetch(`${service.url}/v1/databases`);
    expectError({ status: none.status, body: await none.json() }, 401, "unauthorized");
    expectError(await client(service, "mds_unknown")("GET", "/v1/databases"), 401, "unauthorized");
    const token = await service.createToken("revoked-ws");
    expect((await client(service, token)("GET", "/v1/databases")).status).toBe(200);
    const [row] = await sql<{ id: string }>(
      service.controlUrl,
      "SELECT t.id FROM tokens t JOIN workspaces w ON w.id = t.workspace_id WHERE w.name = 'revoked-ws'",
    );
    const { revokeToken } = await import("../../src/service/domain/tokens.ts");
    const { createPool } = await import("../../src/service/store/pool.ts");
    const pool = createPool(service.controlUrl, 1);
    await revokeToken(pool, row!.id);
    await pool.end();
    expectError(await client(service, token)("GET", "/v1/databases"), 401, "unauthorized");
  });

  it("a token without the scopes is 403 and changes nothing", async () => {
    const weak = client(service, await service.createToken("default", ["workspace:admin"]));
    const before = await counts();
    expectError(await weak("GET", "/v1/databases"), 403, "forbidden");
    expectError(await weak("POST", "/v1/databases", { projectId: project.id }), 403, "forbidden");
    expectError(await weak("GET", `/v1/databases/${database.id}`), 403, "forbidden");
    expect(await counts()).toBe(before);
  });

  it("OAuth: client credentials, refresh rotation, and reuse detection revoking the chain", async () => {
    const [row] = await sql<{ id: string }>(service.controlUrl, "SELECT id FROM tokens WHERE name = 'embedded'");
    const form = (fields: Record<string, string>) =>
      fetch(`${service.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(fields).toString(),
      });
    const bad = await form({ grant_type: "client_credentials", client_id: row!.id, client_secret: "wrong" });
    expectError({ status: bad.status, body: await bad.json() }, 401, "unauthorized");
    const first = OAuthTokenResponse.parse(
      await (await form({ grant_type: "client_credentials", client_id: row!.id, client_secret: service.token })).json(),
    );
    expect(first.scope).toBe("workspace:admin offline_access");
    expect(first.expires_in).toBe(3600);
    expect((await client(service, first.access_token)("GET", "/v1/databases")).status).toBe(200);
    // A refresh token never works as an access token.
    expectError(await client(service, first.refresh_token)("GET", "/v1/databases"), 401, "unauthorized");
    const second = OAuthTokenResponse.parse(
      await (await form({ grant_type: "refresh_token", refresh_token: first.refresh_token })).json(),
    );
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect((await client(service, second.access_token)("GET", "/v1/databases")).status).toBe(200);
    // Reusing the spent refresh token revokes the whole chain, including the newest tokens.
    const reuse = await form({ grant_type: "refresh_token", refresh_token: first.refresh_token });
    expectError({ status: reuse.status, body: await reuse.json() }, 401, "unauthorized");
    expectError(await client(service, second.access_token)("GET", "/v1/databases"), 401, "unauthorized");
    const after = await form({ grant_type: "refresh_token", refresh_token: second.refresh_token });
    expect(after.status).toBe(401);
    const unsupported = await form({ grant_type: "password" });
    expectError({ status: unsupported.status, body: await unsupported.json() }, 400, "invalid_request");
  });

  it("access tokens expire", async () => {
    await sql(service.controlUrl, "UPDATE tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access'");
    const [row] = await sql<{ id: string }>(service.controlUrl, "SELECT id FROM tokens WHERE name = 'embedded'");
    const res = await fetch(`${service.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        client_id: row!.id,
        client_secret: service.token,
      }).toString(),
    });
    const tokens = OAuthTokenResponse.parse(await res.json());
    await sql(service.controlUrl, "UPDATE tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access'");
    expectError(await client(service, tokens.access_token)("GET", "/v1/databases"), 401, "unauthorized");
  });
});

describe("rate limiting", () => {
  it("over the workspace's budget: 429 with Retry-After, shared by all its tokens", async () => {
    let replica: RunningService | undefined;
    try {
      replica = await startService({
        controlUrl: service.controlUrl,
        regions: { "us-east-1": { adminUrl: service.postgresUrl } },
        encryptionKey: Buffer.alloc(32, 1),
        backupDir: `${service.dir}/backups`,
        rateLimit: { perSecond: 0.01, burst: 3 },
        logger: pino({ level: "silent" }),
        spareDatabases: 0,
      });
      const r = client({ url: replica.url }, service.token);
      for (let i = 0; i < 3; i++) expect((await r("GET", "/v1/databases?limit=1")).status).toBe(200);
      const limited = await r("GET", "/v1/databases?limit=1");
      expectError(limited, 429, "rate_limited");
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      // Another token of the same workspace shares the spent budget (minting tokens buys nothing); another workspace has its own.
      expect(
        (await client({ url: replica.url }, await service.createToken("default"))("GET", "/v1/databases?limit=1"))
          .status,
      ).toBe(429);
      expect(
        (await client({ url: replica.url }, await service.createToken("elsewhere"))("GET", "/v1/databases?limit=1"))
          .status,
      ).toBe(200);
    } finally {
      await replica?.stop();
    }
  });
});

describe("logs", () => {
  it("never contain a token, a password or a connection string", async () => {
    // Plant secrets everywhere a careless log line could pick them up.
    const created = (
      await api(
        "POST",
        `/v1/projects/${project.id}/databases`,
        { name: "planted" },
        { "idempotency-key": "planted-key" },
      )
    ).body.data;
    const password: string = created.directConnection.pass;
    await client(service, `${service.token}x`)("GET", "/v1/databases");
    await api("POST", "/v1/projects", `{"name": "${password}"`); // malformed JSON holding a secret
    await api("POST", "/v1/projects", { name: "x", secret: password });
    await eventually(async () =>
      expect((await api("GET", `/v1/databases/${created.id}`)).body.data.status).toBe("ready"),
    );
    expect(logLines.length).toBeGreaterThan(10);
    const all = logLines.join("\n");
    expect(all).not.toContain(service.token);
    expect(all).not.toContain(password);
    expect(all).not.toMatch(/postgres(ql)?:\/\/[^\s"]*:[^\s"]*@/);
    const superPassword = decodeURIComponent(new URL(service.postgresUrl).password);
    expect(all).not.toContain(superPassword);
  });
});
