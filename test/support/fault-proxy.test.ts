import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { normaliseRoute, seededRandom, startFaultProxy, type FaultProxy } from "./fault-proxy.ts";
import { startTcpProxy } from "./tcp-proxy.ts";

// A tiny upstream that echoes what it got and counts what reached it, so each test can tell
// faults that stop a request at the proxy from faults that let the service act.
let upstream: http.Server;
let upstreamUrl: string;
let reached = 0;
let clock = 1_000_000;
let proxy: FaultProxy;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    reached++;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.stringify({
        data: { method: req.method, url: req.url, body: Buffer.concat(chunks).toString(), padding: "x".repeat(200) },
      });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(body);
    });
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", () => r()));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  proxy = await startFaultProxy({ target: upstreamUrl, now: () => clock });
});

afterAll(async () => {
  await proxy.stop();
  await new Promise<void>((r) => upstream.close(() => r()));
});

beforeEach(() => {
  proxy.clearFaults();
  proxy.setSchedule(undefined);
  proxy.resetStats();
  reached = 0;
});

async function call(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(proxy.url + path, { ...init, headers: { authorization: "Bearer t0k3n-planted", ...init.headers } });
}

describe("fault proxy", () => {
  it("forwards requests and counts them per route, per second and per credential", async () => {
    const res = await call("/v1/databases/db_cabcdefghijklmnopqrstuvwx/connections?limit=2", {
      method: "POST",
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { body: string } }).data.body).toBe("{}");
    clock += 1500;
    await call("/v1/databases");
    await call("/v1/databases");
    const stats = proxy.stats();
    expect(stats.total).toBe(3);
    expect(stats.byRoute).toEqual({ "POST /v1/databases/:id/connections": 1, "GET /v1/databases": 2 });
    expect(stats.peakPerSecond).toBe(2);
    expect([...stats.perSecond.values()]).toEqual([1, 2]);
    expect(Object.values(stats.peakPerSecondByCredential)).toEqual([2]);
    // The credential is keyed by a hash, never by the token.
    expect(JSON.stringify(Object.keys(stats.peakPerSecondByCredential))).not.toContain("t0k3n");
  });

  it("answers 429 with Retry-After without reaching the service, for as many times as asked", async () => {
    proxy.inject({ match: { method: "GET" }, fault: { kind: "rate-limit", retryAfterSeconds: 7 }, times: 1 });
    const first = await call("/v1/projects");
    expect(first.status).toBe(429);
    expect(first.headers.get("retry-after")).toBe("7");
    expect(((await first.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    expect((await call("/v1/projects")).status).toBe(200);
    expect(reached).toBe(1);
    expect(proxy.stats().faults).toEqual({ "rate-limit": 1 });
  });

  it("injects 5xx only on matching routes", async () => {
    proxy.inject({ match: { route: /restore$/ }, fault: { kind: "server-error", status: 503 } });
    expect(
      (await call("/v1/databases/db_cabcdefghijklmnopqrstuvwx/restore", { method: "POST", body: "{}" })).status,
    ).toBe(503);
    expect((await call("/v1/databases")).status).toBe(200);
  });

  it("resets the connection before the service sees the request", async () => {
    proxy.inject({ fault: { kind: "reset" }, times: 1 });
    await expect(call("/v1/databases")).rejects.toThrow();
    expect(reached).toBe(0);
  });

  it("lets the service act but loses the answer (reset after forward)", async () => {
    proxy.inject({ fault: { kind: "reset-after-forward" }, times: 1 });
    await expect(call("/v1/databases", { method: "POST", body: "{}" })).rejects.toThrow();
    expect(reached).toBe(1);
  });

  it("truncates the response body", async () => {
    proxy.inject({ fault: { kind: "truncate" }, times: 1 });
    await expect(call("/v1/databases").then((r) => r.text())).rejects.toThrow();
    expect(reached).toBe(1);
  });

  it("delays slow responses", async () => {
    proxy.inject({ fault: { kind: "slow", delayMs: 50 }, times: 1 });
    const res = await call("/v1/databases");
    expect(res.status).toBe(200);
    expect(proxy.stats().faults).toEqual({ slow: 1 });
  });

  it("serves 503 during an 'unavailable' outage and recovers after it", async () => {
    await proxy.startOutage("unavailable");
    const res = await call("/v1/databases");
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    await proxy.endOutage();
    expect((await call("/v1/databases")).status).toBe(200);
    expect(reached).toBe(1);
  });

  it("refuses connections during a 'refuse' outage and listens again on the same port after", async () => {
    await proxy.startOutage("refuse");
    await expect(
      new Promise((resolve, reject) => {
        const s = net.connect(proxy.port, "127.0.0.1", () => resolve(s));
        s.on("error", reject);
      }),
    ).rejects.toMatchObject({ code: "ECONNREFUSED" });
    await proxy.endOutage();
    expect((await call("/v1/databases")).status).toBe(200);
  });

  it("ends a timed outage by itself", async () => {
    await proxy.startOutage("unavailable", 20);
    await expect.poll(async () => (await call("/v1/databases")).status, { timeout: 5_000 }).toBe(200);
  });

  it("gives the same faults for the same seed and request order", async () => {
    const run = async () => {
      proxy.resetStats();
      proxy.setSchedule({ seed: 42, rates: { "rate-limit": 0.3, "server-error": 0.3 } });
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await call("/v1/databases")).status);
      return statuses;
    };
    const a = await run();
    const b = await run();
    expect(a).toEqual(b);
    expect(new Set(a).size).toBeGreaterThan(1);
  });
});

describe("helpers", () => {
  it("normalises ids out of routes", () => {
    expect(normaliseRoute("get", "/v1/projects/proj_cabcdefghijklmnopqrstuvwx/databases?limit=1")).toBe(
      "GET /v1/projects/:id/databases",
    );
    expect(normaliseRoute("DELETE", "/v1/connections/con_c0123456789abcdefghijklmn")).toBe(
      "DELETE /v1/connections/:id",
    );
  });
  it("seeded random is reproducible", () => {
    const a = seededRandom(7);
    const b = seededRandom(7);
    expect([a(), a(), a()]).toEqual([b(), b(), b()]);
  });
});

describe("tcp proxy", () => {
  it("pipes bytes and drops every open connection on command", async () => {
    const tcp = await startTcpProxy({
      targetHost: "127.0.0.1",
      targetPort: Number(new URL(upstreamUrl).port),
      protocol: "http",
    });
    try {
      // A long-lived request stands in for a watch.
      const agent = new http.Agent({ keepAlive: true });
      const first = await fetch(`${tcp.url}/v1/databases`);
      expect(first.status).toBe(200);
      await first.text();
      const hanging = new Promise<string>((resolve) => {
        const req = http.get(`${tcp.url}/v1/x`, { agent }, (res) => {
          res.resume();
          res.on("close", () => resolve("closed"));
        });
        req.on("error", () => resolve("error"));
      });
      await expect.poll(() => tcp.openConnections).toBeGreaterThan(0);
      expect(tcp.dropConnections()).toBeGreaterThan(0);
      expect(await hanging).toMatch(/closed|error/);
      expect((await fetch(`${tcp.url}/v1/databases`)).status).toBe(200);
      agent.destroy();
    } finally {
      await tcp.stop();
    }
  });
});
