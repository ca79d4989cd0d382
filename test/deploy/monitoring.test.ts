// deploy/components/monitoring: the ServiceMonitor scrapes the metrics Service, every alert is valid PromQL
// (`promtool check rules`), fires and stays quiet where it should (`promtool test rules`, the real promtool of
// Debian's prometheus package), has a severity, a summary, a description and a runbook in docs/metrics.md, and every
// query of the rules and the Grafana dashboard names only metrics the operator exports.
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import { kubectl } from "./kubectl.ts";
import {
  exportedMetricNames,
  metricNamesIn,
  prometheusBinary,
  prometheusSynthesized,
  readDashboard,
  renderWithMonitoring,
  repoRoot,
  ruleGroupsOf,
  run,
  runbookBase,
  type MonitoringObject,
  type RuleGroup,
} from "./monitoring.ts";

let objects: MonitoringObject[];
let groups: RuleGroup[];
let dir: string;

beforeAll(async () => {
  objects = await renderWithMonitoring();
  groups = ruleGroupsOf(objects);
  dir = await mkdtemp(join(tmpdir(), "mds-monitoring-"));
});
afterAll(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const alerts = () => groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
const find = (kind: string) => {
  const o = objects.find((x) => x.kind === kind);
  if (o === undefined) throw new Error(`deploy/overlays/with-monitoring renders no ${kind}`);
  return o;
};

describe("the monitoring component", () => {
  it("scrapes the operator's metrics Service by its labels and its port name, in the operator's namespace", () => {
    const monitor = find("ServiceMonitor") as unknown as { metadata: { namespace: string }; spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] } };
    const service = objects.find((o) => o.kind === "Service" && o.metadata.name === "mds-operator-metrics") as unknown as { metadata: { namespace: string; labels: Record<string, string> }; spec: { ports: { name: string }[] } };
    expect(monitor.metadata.namespace).toBe(service.metadata.namespace);
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    // Only the metrics Service matches: the selector must not pick up any other Service of the install.
    const matching = objects.filter((o) => o.kind === "Service" && Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v));
    expect(matching.map((o) => o.metadata.name)).toEqual(["mds-operator-metrics"]);
    expect(monitor.spec.endpoints.map((e) => [e.port, e.path])).toEqual([["http-metrics", "/metrics"]]);
    expect(service.spec.ports.map((p) => p.name)).toContain("http-metrics");
  });

  it("adds exactly a ServiceMonitor, a PrometheusRule and the dashboard ConfigMap to the default install", async () => {
    const base = await kubectl(["kustomize", "deploy"]);
    const names = (objs: MonitoringObject[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    const added = names(objects).filter((n) => !names(parseAllDocuments(base.stdout).map((d) => d.toJS() as MonitoringObject)).includes(n));
    expect(added).toEqual(["ConfigMap/mds-operator-dashboard", "PrometheusRule/mds-operator", "ServiceMonitor/mds-operator"]);
  });

  it("renders as docs/metrics.md shows it added to one's own overlay", async () => {
    const doc = await readFile(join(repoRoot, "docs", "metrics.md"), "utf8");
    const example = /^```yaml\n# my-mds\/kustomization.yaml\n([\s\S]*?)^```/m.exec(doc)?.[1];
    expect(example).toContain("components/monitoring");
    const overlay = join(dir, "overlay");
    await mkdir(join(overlay, "my-mds"), { recursive: true });
    await symlink(repoRoot, join(overlay, "mds"));
    await writeFile(join(overlay, "my-mds", "kustomization.yaml"), example ?? "");
    const result = await kubectl(["kustomize", join(overlay, "my-mds")]);
    expect(result.stderr).toBe("");
    const kinds = parseAllDocuments(result.stdout).map((d) => (d.toJS() as MonitoringObject).kind);
    expect(kinds).toEqual(expect.arrayContaining(["ServiceMonitor", "PrometheusRule", "Deployment"]));
  });

  it("ships the dashboard as a ConfigMap for Grafana's sidecar, byte for byte dashboard.json", async () => {
    const configMap = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "mds-operator-dashboard") as unknown as { metadata: { labels: Record<string, string> }; data: Record<string, string> };
    expect(configMap.metadata.labels["grafana_dashboard"]).toBe("1");
    expect(configMap.data["mds-operator.json"]).toBe(await readFile(join(repoRoot, "deploy/components/monitoring/dashboard.json"), "utf8"));
  });

  it("gives every alert a severity, a summary, a description and a runbook section in docs/metrics.md", async () => {
    const doc = await readFile(join(repoRoot, "docs", "metrics.md"), "utf8");
    expect(alerts().length).toBeGreaterThanOrEqual(10);
    for (const a of alerts()) {
      expect({ alert: a.alert, severity: a.labels?.["severity"] }).toEqual({ alert: a.alert, severity: expect.stringMatching(/^(critical|warning)$/) });
      expect({ alert: a.alert, summary: (a.annotations?.["summary"] ?? "").length > 10, description: (a.annotations?.["description"] ?? "").length > 20 }).toEqual({ alert: a.alert, summary: true, description: true });
      expect({ alert: a.alert, runbook: new RegExp(`^### ${a.alert}$`, "m").test(doc) }).toEqual({ alert: a.alert, runbook: true });
      // runbook_url: that section (its heading's anchor), under the one base docs/metrics.md tells how to replace.
      expect({ alert: a.alert, runbook_url: a.annotations?.["runbook_url"] }).toEqual({ alert: a.alert, runbook_url: `${runbookBase}#${(a.alert ?? "").toLowerCase()}` });
    }
    expect(doc).toContain(runbookBase);
  });

  it("has cluster, namespace, job and instance variables, and every dashboard query selects by all four (no hard-coded job)", async () => {
    const dashboard = (await readDashboard()) as Awaited<ReturnType<typeof readDashboard>> & { templating: { list: { name: string; query?: { query: string } }[] } };
    const variables = dashboard.templating.list.map((v) => v.name);
    expect(variables).toEqual(["datasource", "cluster", "namespace", "job", "instance"]);
    for (const v of dashboard.templating.list.slice(1)) expect(v.query?.query).toMatch(/^label_values\(mds_build_info/);
    const scope = 'cluster=~"$cluster", namespace=~"$namespace", job=~"$job", instance=~"$instance"';
    for (const panel of dashboard.panels)
      for (const t of panel.targets ?? []) {
        expect({ panel: panel.title, job: /job\s*=~?\s*"(?!\$job")/.test(t.expr) }).toEqual({ panel: panel.title, job: false });
        // As many scoped selectors as metric names read.
        expect({ panel: panel.title, scoped: t.expr.split(scope).length - 1 }).toEqual({ panel: panel.title, scoped: metricNamesIn(t.expr).length });
      }
  });

  it("passes promtool check rules", async () => {
    const promtool = await prometheusBinary("promtool");
    await writeFile(join(dir, "rules.yaml"), stringify({ groups }));
    const result = await run(promtool, ["check", "rules", join(dir, "rules.yaml")]);
    expect(result.stdout + result.stderr).toContain(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`);
    expect(result.code).toBe(0);
  });

  it("fires each alert on the series that should fire it and stays quiet on the others (promtool test rules)", async () => {
    const promtool = await prometheusBinary("promtool");
    const testFile = join(repoRoot, "test/deploy/monitoring/alerts.test.yaml");
    // Every alert has both a firing and a quiet case.
    const spec = parse(await readFile(testFile, "utf8")) as { tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[] };
    const cases = spec.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const a of alerts()) {
      const mine = cases.filter((c) => c.alertname === a.alert);
      expect({ alert: a.alert, fires: mine.some((c) => (c.exp_alerts ?? []).length > 0), quiet: mine.some((c) => (c.exp_alerts ?? []).length === 0) }).toEqual({ alert: a.alert, fires: true, quiet: true });
    }
    await writeFile(join(dir, "rules.yaml"), stringify({ groups }));
    await copyFile(testFile, join(dir, "alerts.test.yaml"));
    const result = await run(promtool, ["test", "rules", "alerts.test.yaml"], dir);
    expect(result.stdout + result.stderr).toContain("SUCCESS");
    expect(result.code).toBe(0);
  });

  it("reads only metrics the operator exports, in the rules and in every dashboard query", async () => {
    const exported = await exportedMetricNames();
    const dashboard = await readDashboard();
    const queries = [
      ...groups.flatMap((g) => g.rules.map((r) => ({ where: `rule ${r.alert ?? r.record}`, expr: r.expr }))),
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
    ];
    expect(queries.length).toBeGreaterThan(30);
    const unknown = queries.flatMap((q) => metricNamesIn(q.expr).filter((n) => !exported.has(n) && !prometheusSynthesized.has(n)).map((n) => `${q.where}: ${n}`));
    expect(unknown).toEqual([]);
    // and that each query names at least one metric (the parser found something to check)
    expect(queries.filter((q) => metricNamesIn(q.expr).length === 0).map((q) => q.where)).toEqual([]);
  });

  it("has dashboard queries that are valid PromQL (promtool parses each as a recording rule)", async () => {
    const promtool = await prometheusBinary("promtool");
    const dashboard = await readDashboard();
    const rules = dashboard.panels.flatMap((p, i) => (p.targets ?? []).map((t, j) => ({ record: `dashboard:panel_${i}_${j}`, expr: t.expr })));
    await writeFile(join(dir, "dashboard-rules.yaml"), stringify({ groups: [{ name: "dashboard", rules }] }));
    const result = await run(promtool, ["check", "rules", join(dir, "dashboard-rules.yaml")]);
    expect(result.stdout + result.stderr).toContain(`SUCCESS: ${rules.length} rules found`);
  });
});

describe("metricNamesIn", () => {
  it("finds metric names, not functions, labels, keywords or durations", () => {
    expect(
      metricNamesIn('histogram_quantile(0.99, sum by (le, kind) (rate(mds_x_bucket{job="a", kind=~"b|c"}[5m]))) / on (kind) group_left () (mds_y > bool 1) or absent(up)').sort(),
    ).toEqual(["mds_x_bucket", "mds_y", "up"]);
  });
});
