// The label rules of src/operator/metric-labels.ts hold for every metric the operator serves (its own, the kinds'
// per-object gauges, the API client's and prom-client's process and Node.js metrics), and they catch what they are for.
import { describe, expect, it } from "vitest";
import { labelRuleViolations } from "../../src/operator/metric-labels.ts";
import { declaredMetrics } from "../../scripts/docs/metrics.ts";

describe("metric label rules", () => {
  it("hold for every metric the operator serves", async () => {
    const metrics = await declaredMetrics();
    expect(metrics.length).toBeGreaterThan(50);
    expect(metrics.flatMap((m) => labelRuleViolations(m))).toEqual([]);
  });

  it("serve process_* and nodejs_* under their standard names, and no mds-prefixed copy of them", async () => {
    const names = (await declaredMetrics()).map((m) => m.name);
    expect(names).toEqual(expect.arrayContaining(["process_resident_memory_bytes", "process_cpu_seconds_total", "nodejs_eventloop_lag_p99_seconds", "nodejs_heap_size_used_bytes"]));
    expect(names.filter((n) => /^mds_.*(process_|nodejs_)/.test(n))).toEqual([]);
  });

  it("refuse an object-name label whose help does not say why, and accept it once it does", () => {
    const metric = { name: "mds_database_size_bytes", help: "Size of each Database.", labelNames: ["database_namespace", "database"] };
    expect(labelRuleViolations(metric)).toEqual([
      'mds_database_size_bytes: label "database_namespace" carries object names, and its help does not say why ("One series per <object>: <why>.")',
      'mds_database_size_bytes: label "database" carries object names, and its help does not say why ("One series per <object>: <why>.")',
    ]);
    expect(labelRuleViolations({ ...metric, help: "Size of each Database. One series per Database: an alert must name the database that fills up." })).toEqual([]);
  });

  it("refuse a label named after a secret or an id whatever the help says, and one that is not snake_case", () => {
    const why = "One series per Connection: an alert must name it.";
    expect(labelRuleViolations({ name: "m", help: why, labelNames: ["password", "database_id", "connection_string", "Kind"] })).toEqual([
      'm: label "password" names a secret or an unbounded identifier',
      'm: label "database_id" names a secret or an unbounded identifier',
      'm: label "connection_string" names a secret or an unbounded identifier',
      'm: label "Kind" is not snake_case',
    ]);
  });
});
