// The label rules of every metric the operator serves, written once: the metrics reference (docs/metrics.md) prints
// them from here and test/deploy/metric-labels.test.ts holds the registry to them. A label's values must stay few
// whatever the number of resources (each value is a series Prometheus keeps), and none may carry a secret.

/** Labels whose values are bounded by the code or the cluster, not by how many resources exist; each says why. */
const boundedLabels: Record<string, string> = {
  kind: "a kind of mds (one per registered kind), or a Node.js GC kind",
  controller: "a controller: its kind in lower case, as controller-runtime names it",
  name: "a work queue's controller (`workqueue_*`), or the leader Lease (`leader_election_master_status`)",
  priority: "a work queue priority (always empty)",
  type: "a condition type (`Ready`, `Synced`, `Stalled`), or a Node.js handle type",
  status: "a condition status, an HTTP status code or a client error code",
  reason:
    "a CamelCase condition reason of [conditions.md](conditions.md) (others count as `Other`), or why an API context was dropped",
  result: "a reconcile's result",
  outcome: "`ok` or an error code",
  operation: "an API client operation (the call, not its URL)",
  verb: "a Kubernetes write verb",
  resource: "a Kubernetes resource type",
  code: "an HTTP status code, or `<error>` when no answer came",
  method: "an HTTP method",
  host: "the API server's host and port (one per operator)",
  version: "the version of mds or of Node.js",
  commit: "the commit mds was built from",
  major: "Node.js's version",
  minor: "Node.js's version",
  patch: "Node.js's version",
  space: "a V8 heap space",
  le: "a histogram bucket",
};

/** A label that says a secret or an unbounded identifier by its very name: never allowed. */
const forbiddenLabel = /(^|_)(id|uid|token|password|secret|url|dsn|connection_string)$/;

/**
 * Any other label carries object names (one series per object), allowed only when the metric's help says so and
 * why, in the form "One series per <object>: <why>." (an alert that must name the object, say).
 */
const objectSeriesWhy = /One series per [^:.]+: [^.]{10,}\./;

export interface MetricDeclaration {
  name: string;
  help: string;
  labelNames: readonly string[];
}

/** Every way `metric` breaks the label rules, one sentence each (empty: it keeps them). */
export function labelRuleViolations(metric: MetricDeclaration): string[] {
  const found: string[] = [];
  for (const label of metric.labelNames) {
    if (!/^[a-z][a-z0-9_]*$/.test(label)) found.push(`${metric.name}: label "${label}" is not snake_case`);
    else if (forbiddenLabel.test(label))
      found.push(`${metric.name}: label "${label}" names a secret or an unbounded identifier`);
    else if (!(label in boundedLabels) && !objectSeriesWhy.test(metric.help))
      found.push(
        `${metric.name}: label "${label}" carries object names, and its help does not say why ("One series per <object>: <why>.")`,
      );
  }
  return found;
}

/** The rules as the reference prints them (docs/metrics.md). */
export function labelRulesMarkdown(): string {
  return [
    "Label values stay few whatever the number of resources, and never carry a token, a password or a connection",
    "string. A label is one of these, each bounded by the code or the cluster:",
    "",
    ...Object.entries(boundedLabels).map(([label, why]) => `- \`${label}\`: ${why}`),
    "",
    "Any other label carries object names and so makes one series per object: a metric has one only when its help",
    'text says why, as "One series per <object>: <why>." (an alert that must name the object). No label is named',
    "after an id, a uid, a token, a password, a secret, a URL, a DSN or a connection string.",
  ].join("\n");
}
