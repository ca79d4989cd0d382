// A real Prometheus (Debian's prometheus package) scrapes a real operator (`mds operator`'s runtime: leader election,
// the health and metrics server) against devkube and the service, evaluates the shipped PrometheusRule, and shows
// MdsResourcesStalled quiet, then firing once a Database stalls on an invalid spec, and
// MdsDeletionProtectionNotEnforced firing for a protected Database on this cluster, which has no deletion-protection
// policy. Only those alerts' `for` is shortened (to 5s); promtool test rules covers the real durations
// (test/deploy/monitoring.test.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { createOperatorWithKinds, startOperatorRuntime, type OperatorRuntime } from "../../src/cli/operator.ts";
import { parseOperatorConfig } from "../../src/cli/operator-config.ts";
import { mdsVersion as version } from "../../src/operator/build-info.ts";
import { createKubeClient } from "../../src/kube/client.ts";
import { deletionProtectionEnforcement } from "../../src/operator/deletion-protection-audit.ts";
import {
  exportedMetricNames,
  metricNamesIn,
  prometheusBinary,
  readDashboard,
  renderWithMonitoring,
  ruleGroupsOf,
} from "../deploy/monitoring.ts";
import { eventually, itNeedsDevkube, manifests, onRealCluster, startStack, type Stack } from "./helpers.ts";

let stack: Stack;
let runtime: OperatorRuntime | undefined;
let prometheus: ChildProcess | undefined;
let prometheusUrl: string;
let dir: string;
const prometheusLog: string[] = [];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${prometheusUrl}${path}`);
  const body = (await res.json()) as { status: string; data: T; error?: string };
  if (body.status !== "success") throw new Error(`${path}: ${body.error ?? res.status}`);
  return body.data;
}

interface Alert {
  labels: Record<string, string>;
  state: "pending" | "firing";
  /** When the alert became pending; kept once it fires. */
  activeAt: string;
}
const alertsNamed = async (name: string) =>
  (await api<{ alerts: Alert[] }>("/api/v1/alerts")).alerts.filter((a) => a.labels["alertname"] === name);
const stalledAlerts = () => alertsNamed("MdsResourcesStalled");
const shortened = new Set(["MdsResourcesStalled", "MdsDeletionProtectionNotEnforced"]);
/** A dashboard query as Grafana sends it with every variable at "All". */
const allSelected = (expr: string) => expr.replace(/\$(cluster|namespace|job|instance)\b/g, ".*");

beforeAll(async () => {
  const binary = await prometheusBinary("prometheus");
  stack = await startStack();
  dir = await mkdtemp(join(tmpdir(), "mds-prometheus-"));
  const ns = stack.namespace;
  // `mds operator` as the Deployment runs it, with leader election; only addresses and the fast poll differ.
  const config = parseOperatorConfig(
    [
      "--leader-elect",
      "--metrics-address=127.0.0.1:0",
      "--instance-id=e2e-prometheus",
      `--api-url=${stack.service.url}`,
      `--credentials-secret=${ns}/mds-credentials`,
      `--lease-namespace=${ns}`,
      "--poll-fast=200ms",
      // On a shared cluster the files run in parallel: a cluster-wide operator would count their resources too.
      ...(onRealCluster ? [`--namespaces=${ns}`] : []),
    ],
    {},
  );
  if (config === "help") throw new Error("unexpected help");
  const sink = new Writable({ write: (chunk: Buffer, _e, cb) => (stack.logs.push(chunk.toString()), cb()) });
  runtime = await startOperatorRuntime(config, {
    kubeConfig: stack.kubeConfig,
    logger: pino({ level: "info" }, sink),
    createOperator: createOperatorWithKinds,
    identity: "mds-operator-0",
  });
  await eventually(() => expect(runtime?.isLeader()).toBe(true), { what: "leadership" });
  const target = new URL(runtime.healthUrl ?? "").host;

  const groups = ruleGroupsOf(await renderWithMonitoring()).map((g) => ({
    ...g,
    rules: g.rules.map((r) => (shortened.has(r.alert ?? "") ? { ...r, for: "5s" } : r)),
  }));
  await writeFile(join(dir, "rules.yaml"), stringify({ groups }));
  await writeFile(
    join(dir, "prometheus.yaml"),
    stringify({
      global: { scrape_interval: "1s", scrape_timeout: "1s", evaluation_interval: "1s" },
      rule_files: ["rules.yaml"],
      // The labels a ServiceMonitor scrape carries: job after the Service, the target's namespace.
      scrape_configs: [
        {
          job_name: "mds-operator-metrics",
          static_configs: [{ targets: [target], labels: { namespace: "mds-system" } }],
        },
      ],
    }),
  );
  const port = await freePort();
  prometheusUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(
    binary,
    [
      `--config.file=${join(dir, "prometheus.yaml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  prometheus.stdout?.on("data", (d: Buffer) => prometheusLog.push(d.toString()));
  prometheus.stderr?.on("data", (d: Buffer) => prometheusLog.push(d.toString()));
  await eventually(async () => expect((await fetch(`${prometheusUrl}/-/ready`)).status).toBe(200), {
    what: "Prometheus ready",
  }).catch((err: unknown) => {
    throw new Error(`Prometheus did not start: ${(err as Error).message}\n${prometheusLog.join("").slice(-2000)}`);
  });
}, 120_000);

afterAll(async () => {
  if (prometheus?.exitCode === null) {
    const exited = new Promise((resolve) => prometheus?.once("exit", resolve));
    prometheus.kill("SIGTERM");
    await exited;
  }
  await runtime?.stop();
  await stack?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe("a real Prometheus against a real operator", () => {
  it("scrapes the operator, reads every metric name the dashboard and rules use, and answers each dashboard query", async () => {
    await eventually(
      async () => {
        const { activeTargets } = await api<{
          activeTargets: { health: string; lastError: string; labels: Record<string, string> }[];
        }>("/api/v1/targets");
        expect(activeTargets.map((t) => [t.labels["job"], t.health, t.lastError])).toEqual([
          ["mds-operator-metrics", "up", ""],
        ]);
      },
      { what: "the scrape" },
    );
    const leader = await api<{ result: { value: [number, string] }[] }>(
      "/api/v1/query?query=" + encodeURIComponent('sum(mds_operator_leader{job="mds-operator-metrics"})'),
    );
    expect(leader.result[0]?.value[1]).toBe("1");
    // The conventional names: client-go's leader election and REST client metrics, prom-client's defaults, build info.
    const query = async (q: string) =>
      (
        await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
          `/api/v1/query?query=${encodeURIComponent(q)}`,
        )
      ).result;
    expect((await query('leader_election_master_status{name="mds-operator"}'))[0]?.value[1]).toBe("1");
    expect(
      Number((await query('sum(rest_client_requests_total{code="200", method="GET"})'))[0]?.value[1]),
    ).toBeGreaterThan(0);
    expect(Number((await query("process_resident_memory_bytes"))[0]?.value[1])).toBeGreaterThan(10_000_000);
    expect(await query("nodejs_eventloop_lag_p99_seconds")).toHaveLength(1);
    expect((await query("mds_build_info"))[0]?.metric).toMatchObject({
      version: version(),
      commit: expect.stringMatching(/^([0-9a-f]{7,64}|unknown)$/),
    });
    // What Prometheus stored from the real exposition: the controller-runtime names are among it, as they are declared.
    const scraped = new Set(await api<string[]>("/api/v1/label/__name__/values"));
    for (const name of [
      "controller_runtime_reconcile_total",
      "controller_runtime_max_concurrent_reconciles",
      "workqueue_depth",
      "workqueue_longest_running_processor_seconds",
      "mds_operator_longest_not_ready_seconds",
    ]) {
      expect({ name, scraped: scraped.has(name) }).toEqual({ name, scraped: true });
    }
    const exported = await exportedMetricNames();
    for (const name of scraped)
      if (/^(mds_|controller_runtime_|workqueue_|process_|nodejs_|rest_client_|leader_election_)/.test(name))
        expect({ name, declared: exported.has(name) }).toEqual({ name, declared: true });
    // Every dashboard query runs on the real engine.
    const dashboard = await readDashboard();
    for (const panel of dashboard.panels) {
      for (const t of panel.targets ?? []) {
        expect(metricNamesIn(t.expr).length).toBeGreaterThan(0);
        await api(`/api/v1/query?query=${encodeURIComponent(allSelected(t.expr))}`);
      }
    }
  }, 30_000);

  it("keeps MdsResourcesStalled quiet while all is well, and fires it for a Database stalled on an invalid spec", async () => {
    await eventually(
      async () =>
        expect(
          (await api<{ groups: { rules: unknown[] }[] }>("/api/v1/rules")).groups[0]?.rules.length,
        ).toBeGreaterThan(10),
      { what: "rules loaded" },
    );
    expect(await stalledAlerts()).toEqual([]);
    // ObserveOnly without spec.externalId: a terminal InvalidSpec, Stalled=True.
    const applied = Date.now();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "nothing-to-observe", namespace: stack.namespace },
        spec: { projectId: "proj_00000000", managementPolicy: "ObserveOnly" },
      }),
    );
    const firing = await eventually(
      async () => {
        const alerts = await stalledAlerts();
        expect(alerts.map((a) => [a.state, a.labels["kind"], a.labels["reason"], a.labels["severity"]])).toEqual([
          ["firing", "Database", "InvalidSpec", "warning"],
        ]);
        return { activeAt: Date.parse(alerts[0]?.activeAt ?? ""), firingAt: Date.now() };
      },
      { what: "MdsResourcesStalled firing", timeoutMs: 30_000 },
    );
    // It was pending for the rule's `for` (5 s here) before firing: read from the alert itself, which keeps the time it
    // became pending, rather than by polling for the pending state, which a slow poll can miss.
    expect(firing.activeAt).toBeGreaterThanOrEqual(applied - 1000);
    expect(firing.firingAt - firing.activeAt).toBeGreaterThanOrEqual(5000);
  }, 45_000);

  itNeedsDevkube(
    "fires MdsDeletionProtectionNotEnforced for a protected Database where no policy enforces the field",
    "cluster to itself: the audit needs an operator watching every namespace, which on a shared cluster would count the other files' resources",
    async () => {
      // devkube here has no mds-deletion-protection policy (the e2e stack does not install it); a real cluster may.
      const enforcement = await deletionProtectionEnforcement(createKubeClient(stack.kubeConfig));
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests({
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "protected-but-not", namespace: stack.namespace },
          spec: { projectId: "proj_00000000", deletionProtection: true },
        }),
      );
      if (enforcement.state === "enforced") {
        const alerts = await alertsNamed("MdsDeletionProtectionNotEnforced");
        expect(alerts).toEqual([]);
        return;
      }
      expect(enforcement.state).toBe("missing");
      await eventually(
        async () => {
          const alerts = await alertsNamed("MdsDeletionProtectionNotEnforced");
          expect(alerts.map((a) => [a.state, a.labels["kind"], a.labels["severity"], a.labels["namespace"]])).toEqual([
            ["firing", "Database", "warning", "mds-system"],
          ]);
        },
        { what: "MdsDeletionProtectionNotEnforced firing", timeoutMs: 30_000 },
      );
    },
    45_000,
  );
});
