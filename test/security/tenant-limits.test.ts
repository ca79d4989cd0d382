import fc from "fast-check";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RateLimiter } from "../../src/service/runtime/rate-limit.ts";
import { startTestService, type TestService } from "../support/test-service.ts";
import { client, eventually, type Json } from "../service/helpers.ts";

// A tenant with its own token: budgets it could multiply by minting tokens, authentication it could hammer, inputs
// that answered 500 or echoed 60 KB back, and a restore that told a foreign backup apart from a missing one.

/** GET from another loopback address (the service sees a different client). */
function statusFrom(localAddress: string, url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { localAddress, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once("error", reject);
  });
}

let service: TestService;

beforeAll(async () => {
  service = await startTestService({ service: { rateLimit: { perSecond: 0.01, burst: 20 } } });
});
afterAll(async () => {
  await service?.stop();
});

describe("rate limits that hold", () => {
  it("share one budget among all tokens of a workspace", async () => {
    // A fresh workspace: its tokens together get the burst (20), however many there are.
    const tokens = await Promise.all(Array.from({ length: 5 }, () => service.createToken("minter")));
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++)
      statuses.push((await client(service, tokens[i % tokens.length]!)("GET", "/v1/projects")).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    const limited = await client(service, tokens[0]!)("GET", "/v1/projects");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another workspace is not affected.
    expect((await client(service, await service.createToken("bystander"))("GET", "/v1/projects")).status).toBe(200);
  });
});

describe("per client address", () => {
  it("limits failed authentications and /oauth/token per address and token prefix; a valid token and other addresses go on", async () => {
    const own = await startTestService({ service: { authRateLimit: { perSecond: 0.01, burst: 10 } } });
    try {
      // Guesses at one token (they share its first 16 characters) share one budget, then are refused unread.
      const guesses: number[] = [];
      for (let i = 0; i < 12; i++)
        guesses.push(
          (await client(own, `mds_guessing_one_${String(i).padStart(26, "0")}`)("GET", "/v1/projects")).status,
        );
      expect(guesses.slice(0, 10).every((s) => s === 401)).toBe(true);
      expect(guesses.slice(10)).toEqual([429, 429]);
      const secret = "mds_guessing_one_secret_xxxxxxxxxxxxxxxxxxxxxxxxxx";
      const oauth = await fetch(`${own.url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `grant_type=client_credentials&client_id=x&client_secret=${secret}`,
      });
      expect(oauth.status).toBe(429);
      expect(Number(oauth.headers.get("retry-after"))).toBeGreaterThan(0);
      // A valid token from the same address is not refused because other tokens failed (in a cluster every
      // team shares the operator's address). Guessing a 32-byte token is hopeless; what the budget stops is a loop.
      expect((await client(own, own.token)("GET", "/v1/projects")).status).toBe(200);
      // Another client address has its own budget for the same token.
      expect(await statusFrom("127.0.0.2", `${own.url}/v1/projects`, `mds_guessing_one_${"1".repeat(26)}`)).toBe(401);
    } finally {
      await own.stop();
    }
  });

  it("keeps its memory bounded without forgetting an active client", () => {
    let now = 0;
    const limiter = new RateLimiter({ perSecond: 1, burst: 2, maxKeys: 1000, now: () => now });
    limiter.take("attacker");
    limiter.take("attacker");
    expect(limiter.take("attacker")).toBeGreaterThan(0);
    for (let i = 0; i < 10_000; i++) {
      now += 1;
      limiter.take(`spray-${i}`);
      if (i % 100 === 0) limiter.take("attacker");
      expect(limiter.size).toBeLessThanOrEqual(1000);
    }
    // Seen every 100 ms while 10,000 addresses passed: still remembered, still spent.
    expect(limiter.exhausted("attacker")).toBeGreaterThan(0);
  });
});

describe("bad input is a 4xx with a short echo", () => {
  let api: ReturnType<typeof client>;
  // Its own hook, not one registered inside beforeAll: vitest never runs a hook registered while hooks run, and the
  // service (PostgreSQL and PgBouncer) outlived every run.
  let own: TestService | undefined;
  beforeAll(async () => {
    own = await startTestService();
    api = client(own, own.token);
    urlOf = own.url;
  });
  afterAll(async () => {
    await own?.stop();
  });
  let urlOf = "";

  it("refuses a cursor that decodes to an impossible date", async () => {
    const cursor = Buffer.from("2020-02-30T00:00:00.000000Z|db_cabcdefghijklmnopqrstuvwx").toString("base64url");
    const res = await api("GET", `/v1/databases?cursor=${cursor}`);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/invalid cursor/);
  });

  it("refuses a malformed percent-escape in HTTP Basic credentials on /oauth/token", async () => {
    const res = await fetch(`${urlOf}/oauth/token`, {
      method: "POST",
      headers: {
        authorization: `Basic ${Buffer.from("%zz:%zz").toString("base64")}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: "grant_type=client_credentials",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.message).toMatch(/malformed HTTP Basic/);
  });

  it("echoes at most a short prefix of a 60 KB path id", async () => {
    const id = `db_c${"a".repeat(60_000)}`;
    for (const path of [`/v1/databases/${id}`, `/v1/databases/${id}/connections`, `/v1/nothing/${id}`]) {
      const res = await api("GET", path);
      expect(res.status).toBeLessThan(500);
      expect(JSON.stringify(res.body).length).toBeLessThan(600);
    }
  });

  it("answers random path ids, queries, headers and bodies with < 500 and a well-formed error", async () => {
    const routes = [
      "GET /v1/databases/{id}",
      "GET /v1/databases",
      "GET /v1/projects/{id}/databases",
      "POST /v1/databases",
      "PATCH /v1/databases/{id}",
      "POST /v1/databases/{id}/restore",
      "GET /v1/connections",
      "POST /v1/connections/{id}/rotate",
      "GET /v1/databases/{id}/backups",
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.string({ maxLength: 80 }),
        fc.string({ maxLength: 80 }),
        fc.string({ maxLength: 60 }),
        fc.string({ maxLength: 200 }),
        async (route, id, query, key, body) => {
          const [method, template] = route.split(" ") as [string, string];
          const path = template.replace("{id}", encodeURIComponent(id || "x"));
          const qs = `?cursor=${encodeURIComponent(query)}&limit=${encodeURIComponent(query)}&databaseId=${encodeURIComponent(query)}&logicalId=${encodeURIComponent(query)}`;
          const headers: Record<string, string> = /^[\x21-\x7e]*$/.test(key) && key ? { "idempotency-key": key } : {};
          const res = await api(method, `${path}${qs}`, method === "GET" ? undefined : body, headers);
          expect(res.status).toBeLessThan(500);
          expect(typeof res.body?.error?.message === "string" || res.status < 300).toBe(true);
        },
      ),
      { numRuns: 150, seed: 12 },
    );
  });
});

describe("no existence oracle for backups", () => {
  it("answers another workspace's backup exactly as one that never existed", async () => {
    const other = client(service, await service.createToken("victim"));
    const theirs = (await other("POST", "/v1/projects", { name: "victim" })).body.data;
    await eventually(async () =>
      expect((await other("GET", `/v1/databases/${theirs.database.id}`)).body.data.status).toBe("ready"),
    );
    const theirBackup = (await other("POST", `/v1/databases/${theirs.database.id}/backups`)).body.data.id;
    const mine = client(service, await service.createToken("mine-again"));
    // Our own database as target and named source, their backup id: must look like a backup that does not exist.
    const ownProject = (await mine("POST", "/v1/projects", { name: "target" })).body.data;
    const target = ownProject.database.id;
    await eventually(async () => expect((await mine("GET", `/v1/databases/${target}`)).body.data.status).toBe("ready"));
    const restore = (backupId: string) =>
      mine("POST", `/v1/databases/${target}/restore`, { source: { type: "backup", databaseId: target, backupId } });
    const fromCreate = (backupId: string) =>
      mine("POST", "/v1/databases", {
        projectId: ownProject.id,
        source: { type: "backup", databaseId: target, backupId },
      });
    const never = "bkp_czzzzzzzzzzzzzzzzzzzzzzzz";
    for (const attempt of [restore, fromCreate]) {
      const foreign = await attempt(theirBackup);
      const missing = await attempt(never);
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(foreign.body.error.code).toBe(missing.body.error.code);
      expect(foreign.body.error.message.replace(theirBackup, "ID")).toBe(
        missing.body.error.message.replace(never, "ID"),
      );
      expect(foreign.body.error.hint).toBe(missing.body.error.hint);
    }
  });
});
