import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHealthApp, listenHealth, parseListenAddress } from "./health-server.ts";
import { createMetricsRegistry, operatorMetrics } from "./metrics.ts";

describe("health server", () => {
  const state = { live: true, ready: false };
  const registry = createMetricsRegistry();
  const app = createHealthApp({
    registry,
    isLive: () => state.live,
    isReady: () => state.ready,
    describe: () => "standby (leader: other)",
  });
  let url = "";
  beforeAll(async () => {
    ({ url } = await listenHealth(app, "127.0.0.1:0"));
  });
  afterAll(async () => {
    await app.close();
  });

  it("/readyz follows readiness and says why", async () => {
    let res = await fetch(`${url}/readyz`);
    expect([res.status, await res.text()]).toEqual([503, "not ready: standby (leader: other)\n"]);
    state.ready = true;
    res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(200);
  });

  it("/healthz follows liveness", async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    state.live = false;
    expect((await fetch(`${url}/healthz`)).status).toBe(503);
    state.live = true;
  });

  it("/metrics serves the operator's metrics in Prometheus text format", async () => {
    const m = operatorMetrics(registry);
    expect(operatorMetrics(registry)).toBe(m);
    m.kubeWrites.inc({ verb: "create", resource: "secrets" });
    m.leader.set(1);
    const res = await fetch(`${url}/metrics`);
    const text = await res.text();
    expect(res.headers.get("content-type")).toContain("text/plain");
    expect(text).toContain('mds_operator_kube_writes_total{verb="create",resource="secrets"} 1');
    expect(text).toContain("mds_operator_leader 1");
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(text).not.toContain("mds_operator_process_");
  });

  it("parses listen addresses and refuses bad ones", () => {
    expect(parseListenAddress(":8080")).toEqual({ host: "0.0.0.0", port: 8080 });
    expect(parseListenAddress("127.0.0.1:9")).toEqual({ host: "127.0.0.1", port: 9 });
    expect(parseListenAddress("[::1]:80")).toEqual({ host: "::1", port: 80 });
    expect(() => parseListenAddress("localhost")).toThrow('invalid listen address "localhost"');
    expect(() => parseListenAddress(":99999")).toThrow("invalid listen address");
  });
});
