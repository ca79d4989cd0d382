// Shared by the monitoring tests: the component rendered by the real kubectl's kustomize, the Prometheus binaries of
// Debian's `prometheus` package (never skipped: a missing one fails with how to install it), the metric names a PromQL
// expression reads, and the names the operator's registry exports.
import { objectGauges } from "../../src/resources/index.ts";
import { spawn } from "node:child_process";
import { access, constants, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { prometheusHooks } from "../../src/client/index.ts";
import { createMetricsRegistry, operatorMetrics } from "../../src/operator/metrics.ts";
import { kubectl } from "./kubectl.ts";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const componentDir = join(repoRoot, "deploy", "components", "monitoring");
/** Where every alert's runbook_url points: docs/metrics.md, one section per alert. */
export const runbookBase = "https://mds.dev/docs/metrics.md";

/** The absolute path of a binary of Debian's `prometheus` package (`promtool`, `prometheus`), or a failure saying how to get it. */
export async function prometheusBinary(name: "promtool" | "prometheus"): Promise<string> {
  for (const dir of (process.env["PATH"] ?? "").split(":").concat(["/usr/bin", "/usr/local/bin"])) {
    const path = join(dir, name);
    if (await access(path, constants.X_OK).then(() => true, () => false)) return path;
  }
  throw new Error(`${name} is not installed: \`npm run setup\` installs it (Debian package prometheus), or apt-get install prometheus`);
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(binary: string, args: string[], cwd?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

export interface MonitoringObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleGroup {
  name: string;
  rules: Rule[];
}

/** deploy/overlays/with-monitoring as `kubectl kustomize` renders it. */
export async function renderWithMonitoring(): Promise<MonitoringObject[]> {
  const result = await kubectl(["kustomize", "deploy/overlays/with-monitoring"]);
  if (result.code !== 0) throw new Error(`kubectl kustomize deploy/overlays/with-monitoring failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((d) => d.toJS() as MonitoringObject);
}

/** The rule groups of the PrometheusRule, as a Prometheus rule file holds them. */
export function ruleGroupsOf(objects: MonitoringObject[]): RuleGroup[] {
  const rule = objects.find((o) => o.kind === "PrometheusRule");
  if (rule === undefined) throw new Error("the monitoring component renders no PrometheusRule");
  return (rule["spec"] as { groups: RuleGroup[] }).groups;
}

export interface DashboardPanel {
  title: string;
  type: string;
  targets?: { expr: string }[];
}
export async function readDashboard(): Promise<{ title: string; uid: string; panels: DashboardPanel[] }> {
  return JSON.parse(await readFile(join(componentDir, "dashboard.json"), "utf8")) as { title: string; uid: string; panels: DashboardPanel[] };
}

const keywords = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"]);

/**
 * The metric names a PromQL expression reads: identifiers outside strings, label matchers and range brackets that
 * are not a keyword and not a function (followed by "("). Enough for the expressions we write; promtool checks
 * that they parse at all.
 */
export function metricNamesIn(expr: string): string[] {
  const text = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const names = new Set<string>();
  for (const m of text.matchAll(/(?<![\w:.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (name === undefined || call !== undefined || keywords.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names];
}

/** Series Prometheus makes itself for every target; a query may read them though the operator does not export them. */
export const prometheusSynthesized = new Set(["up", "scrape_duration_seconds", "scrape_samples_scraped", "ALERTS", "ALERTS_FOR_STATE"]);

/** Every series name the operator's registry can serve: its metrics and the API client's, histograms' _bucket/_sum/_count. */
export async function exportedMetricNames(): Promise<Set<string>> {
  const registry = createMetricsRegistry();
  operatorMetrics(registry, objectGauges());
  prometheusHooks(registry);
  const names = new Set<string>();
  for (const m of await registry.getMetricsAsJSON()) {
    names.add(m.name);
    // prom-client's types call it an enum; at run time it is the exposition's type name.
    const type = String(m.type);
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${m.name}${suffix}`);
    if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(`${m.name}${suffix}`);
  }
  return names;
}
