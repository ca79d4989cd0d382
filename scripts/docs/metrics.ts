// The metrics table of docs/metrics.md, rendered from the operator's own registry (src/operator/metrics.ts and the
// API client's src/client/prometheus-hooks.ts), so
// the reference lists exactly what /metrics serves. `npm run docs:reference` rewrites the block between the
// markers; test/docs/generated.test.ts fails when it drifts.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { prometheusHooks } from "../../src/client/index.ts";
import { createMetricsRegistry, operatorMetrics } from "../../src/operator/metrics.ts";

export const metricsDocPath = join(fileURLToPath(new URL("../../", import.meta.url)), "docs", "metrics.md");
export const beginMarker = "<!-- BEGIN generated: metrics table (npm run docs:reference) -->";
export const endMarker = "<!-- END generated: metrics table -->";

export async function renderMetricsTable(): Promise<string> {
  const registry = createMetricsRegistry();
  operatorMetrics(registry);
  // The operator's API clients report into the same registry (src/operator/index.ts).
  prometheusHooks(registry);
  const rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"];
  const metrics = await registry.getMetricsAsJSON();
  for (const m of metrics.filter((x) => !/^mds_operator_(process_|nodejs_)/.test(x.name)).sort((a, b) => a.name.localeCompare(b.name))) {
    const labelNames = (registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] } | undefined)?.labelNames ?? [];
    rows.push(`| \`${m.name}\` | ${m.type} | ${labelNames.map((l) => `\`${l}\``).join(", ")} | ${m.help} |`);
  }
  rows.push("", "Plus prom-client's process and Node.js runtime metrics under `mds_operator_process_*` and `mds_operator_nodejs_*` (CPU, resident memory, event loop lag, GC, open handles).");
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
