// The metrics table of docs/metrics.md and its label rules, rendered from the operator's own registry
// (src/operator/metrics.ts, the kinds' per-object gauges, the API client's src/client/prometheus-hooks.ts and
// prom-client's process and Node.js metrics) and from src/operator/metric-labels.ts, so the reference lists exactly
// what /metrics serves. `npm run docs:reference` rewrites the block between the markers; test/docs/generated.test.ts
// fails when it drifts.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { prometheusHooks } from "../../src/client/index.ts";
import { labelRulesMarkdown, type MetricDeclaration } from "../../src/operator/metric-labels.ts";
import { createMetricsRegistry, operatorMetrics } from "../../src/operator/metrics.ts";
import { objectGauges } from "../../src/resources/index.ts";

export const metricsDocPath = join(fileURLToPath(new URL("../../", import.meta.url)), "docs", "metrics.md");
export const beginMarker = "<!-- BEGIN generated: metrics table (npm run docs:reference) -->";
export const endMarker = "<!-- END generated: metrics table -->";

/** Every metric a running operator serves, with its type, help and label names, sorted by name. */
export async function declaredMetrics(): Promise<(MetricDeclaration & { type: string })[]> {
  const registry = createMetricsRegistry();
  operatorMetrics(registry, objectGauges());
  // The operator's API clients report into the same registry (src/operator/index.ts).
  prometheusHooks(registry);
  const metrics = await registry.getMetricsAsJSON();
  return metrics
    .map((m) => ({
      name: m.name,
      // prom-client's types call it an enum; at run time it is the exposition's type name.
      type: String(m.type),
      help: m.help,
      labelNames: (registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] } | undefined)?.labelNames ?? [],
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

export async function renderMetricsTable(): Promise<string> {
  const rows = [labelRulesMarkdown(), "", "| metric | type | labels | meaning |", "|---|---|---|---|"];
  for (const m of await declaredMetrics())
    rows.push(`| \`${m.name}\` | ${m.type} | ${m.labelNames.map((l) => `\`${l}\``).join(", ")} | ${m.help.replaceAll("|", "\\|")} |`);
  return rows.join("\n");
}

/** docs/metrics.md with its generated block replaced by the current table. */
export async function renderMetricsDoc(): Promise<string> {
  const text = await readFile(metricsDocPath, "utf8");
  const begin = text.indexOf(beginMarker);
  const end = text.indexOf(endMarker);
  if (begin < 0 || end < begin) throw new Error(`${metricsDocPath} lacks the generated-block markers`);
  return `${text.slice(0, begin + beginMarker.length)}\n${await renderMetricsTable()}\n${text.slice(end)}`;
}
