// charts/mds, with the real helm 3: lint, the objects it renders equal to the kustomize installs (one source of
// truth: the chart's defaults are `kubectl apply -k deploy/`, each overlay is a value), every object valid against the
// Kubernetes and Prometheus Operator schemas, bad values refused, and what `npm run chart` copies or generates current.
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { chartRoot, findChartDrift } from "../../scripts/chart.ts";
import { helm } from "./helm.ts";
import { kubectl } from "./kubectl.ts";
import { describeObject, validateKubernetesObject, type KubeObjectLike } from "./kubernetes-schema.ts";

interface Obj extends KubeObjectLike {
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

const parseObjects = (text: string) =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);

async function template(values: string[] = [], extra: string[] = []): Promise<Obj[]> {
  const result = await helm(["template", "mds", chartRoot, "--namespace", "mds-system", "--include-crds", ...values.flatMap((v) => ["--set", v]), ...extra]);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseObjects(result.stdout);
}

async function kustomize(dir: string): Promise<Obj[]> {
  const result = await kubectl(["kustomize", dir]);
  if (result.code !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${result.stderr}`);
  return parseObjects(result.stdout);
}

// What legitimately differs between the two renderings: who manages the objects (labels), how a changed option rolls
// the pods (kustomize hashes the ConfigMap's name, the chart annotates the pod template with a checksum), Helm's keep
// policy on the namespace, and the labels kustomize stamps on CRDs (Helm never templates crds/).
// part-of too: kustomize stamps it only on the base's objects, not on those its components add.
const toolLabels = ["app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"];
function normalize(o: Obj): Obj {
  const copy = JSON.parse(JSON.stringify(o).replace(/"mds-operator-config-[a-z0-9]{10}"/g, '"mds-operator-config"')) as Obj;
  const meta = copy.metadata;
  for (const l of toolLabels) delete meta.labels?.[l];
  if (copy.kind === "CustomResourceDefinition") delete meta.labels;
  if (meta.labels !== undefined && Object.keys(meta.labels).length === 0) delete meta.labels;
  delete meta.annotations?.["helm.sh/resource-policy"];
  if (meta.annotations !== undefined && Object.keys(meta.annotations).length === 0) delete meta.annotations;
  const template = (copy as { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } }).spec?.template?.metadata;
  if (template?.annotations !== undefined) {
    delete template.annotations["checksum/config"];
    if (Object.keys(template.annotations).length === 0) delete template.annotations;
  }
  return copy;
}

const byKey = (objects: Obj[]) => new Map(objects.map(normalize).map((o) => [describeObject(o), o]));

// Each kustomize install and the values that give the same objects. namespace.create stands in for the Namespace
// `kubectl apply -k` creates (with Helm it is usually `--create-namespace` or an existing one).
const equivalents: [string, string[]][] = [
  ["deploy", ["namespace.create=true"]],
  ["deploy/overlays/single-namespace", ["namespace.create=true", "singleNamespace=true"]],
  ["deploy/overlays/with-monitoring", ["namespace.create=true", "monitoring.enabled=true"]],
  ["deploy/overlays/with-service", ["namespace.create=true", "service.enabled=true"]],
  ["deploy/overlays/with-rotation-consumers", ["namespace.create=true", "rotationConsumers.enabled=true"]],
  ["deploy/overlays/single-namespace-rotation-consumers", ["namespace.create=true", "singleNamespace=true", "rotationConsumers.enabled=true"]],
];

describe.each(equivalents)("helm template with the values equivalent to %s", (dir, values) => {
  it("renders the same objects as kubectl kustomize (same set, same RBAC, same security contexts, same options)", async () => {
    // --skip-tests: the `helm test` hook pod is the chart's own (checked below).
    const [chart, kustomized] = await Promise.all([template(values, ["--skip-tests"]), kustomize(dir)]);
    const fromChart = byKey(chart);
    const fromKustomize = byKey(kustomized);
    expect([...fromChart.keys()].sort()).toEqual([...fromKustomize.keys()].sort());
    for (const [key, expected] of fromKustomize) expect({ key, object: fromChart.get(key) }).toEqual({ key, object: expected });
  });
});

it("renders the Namespace only when asked (the release namespace is otherwise Helm's or the user's)", async () => {
  expect((await template()).filter((o) => o.kind === "Namespace")).toEqual([]);
});

it("passes helm lint --strict with the defaults and with every option on", async () => {
  for (const values of [[], ["singleNamespace=true", "rotationConsumers.enabled=true", "monitoring.enabled=true", "monitoring.release=kube-prometheus-stack", "service.enabled=true", "credentials.fallbackNamespaces={shop,billing}", "image.digest=sha256:" + "a".repeat(64)]]) {
    const result = await helm(["lint", "--strict", chartRoot, ...values.flatMap((v) => ["--set", v])]);
    expect({ values, code: result.code, problems: result.stdout.split("\n").filter((l) => /\[(WARNING|ERROR)\]/.test(l)) }).toEqual({ values, code: 0, problems: [] });
  }
});

it("renders every object valid against the Kubernetes and Prometheus Operator schemas, with every option on", async () => {
  const objects = await template(["namespace.create=true", "monitoring.enabled=true", "monitoring.release=kps", "service.enabled=true", "config.extra.MDS_CONCURRENCY=8", "credentials.fallbackNamespaces={shop}", "tolerations[0].key=dedicated", "nodeSelector.pool=system"]);
  // The helm test hook is a template too (helm template renders it): it must be a valid restricted pod as well.
  expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(["Pod", "ServiceMonitor", "PrometheusRule", "StatefulSet"]));
  const problems: string[] = [];
  for (const o of objects) {
    if (o.apiVersion.startsWith("monitoring.coreos.com/")) problems.push(...(await validatePrometheusOperatorObject(o)));
    else problems.push(...(await validateKubernetesObject(o)));
  }
  expect(problems).toEqual([]);
  const monitor = objects.find((o) => o.kind === "ServiceMonitor");
  const rule = objects.find((o) => o.kind === "PrometheusRule");
  expect([monitor?.metadata.labels?.release, rule?.metadata.labels?.release]).toEqual(["kps", "kps"]);
  const config = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "mds-operator-config") as unknown as { data: Record<string, string> };
  expect(config.data).toMatchObject({ MDS_CONCURRENCY: "8", MDS_CREDENTIALS_FALLBACK_NAMESPACES: "shop", MDS_API_URL: "http://mds-service.mds-system.svc:8080" });
});

async function validatePrometheusOperatorObject(o: Obj): Promise<string[]> {
  const version = o.apiVersion.split("/")[1] ?? "";
  const module = (await import(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`)) as Record<string, (new (data: unknown) => { validate(): void }) | undefined>;
  const Model = module[o.kind];
  if (Model === undefined) return [`${describeObject(o)}: unknown kind`];
  try {
    new Model(o).validate();
    return [];
  } catch (err) {
    return [`${describeObject(o)}: ${(err as Error).message}`];
  }
}

it("rolls the operator's pods when an option changes, and only then", async () => {
  const checksum = async (values: string[]) => {
    const d = (await template(values)).find((o) => o.kind === "Deployment" && o.metadata.name === "mds-operator") as unknown as { spec: { template: { metadata: { annotations: Record<string, string> } } } };
    return d.spec.template.metadata.annotations["checksum/config"];
  };
  const [base, same, changed] = await Promise.all([checksum([]), checksum(["replicas=3"]), checksum(["config.logLevel=debug"])]);
  expect(same).toBe(base);
  expect(changed).not.toBe(base);
});

it("refuses values the schema does not allow, naming the value", async () => {
  const cases: [string[], RegExp][] = [
    [["replicas=-1"], /replicas: Must be greater than or equal to 0/],
    [["config.logLevel=loud"], /config\.logLevel: config\.logLevel must be one of the following/],
    [["config.apiUrl=mds.example.com"], /config\.apiUrl: Does not match pattern/],
    [["config.extra.CONCURRENCY=8"], /CONCURRENCY/],
    [["imageTag=1.0"], /Additional property imageTag is not allowed/],
  ];
  for (const [values, message] of cases) {
    const result = await helm(["template", "mds", chartRoot, ...values.flatMap((v) => ["--set", v])]);
    expect({ values, code: result.code }).toEqual({ values, code: 1 });
    expect(result.stderr).toMatch(message);
  }
});

it("holds the CRDs of the generator, deploy/'s monitoring and service files, and a current values table (npm run chart)", async () => {
  expect(await findChartDrift()).toEqual([]);
});

it("pins the image to the chart's appVersion by default, and to a digest when given one", async () => {
  const image = async (values: string[]) => {
    const d = (await template(values)).find((o) => o.kind === "Deployment" && o.metadata.name === "mds-operator") as unknown as { spec: { template: { spec: { containers: { image: string }[] } } } };
    return d.spec.template.spec.containers[0]?.image;
  };
  const digest = `sha256:${"0".repeat(64)}`;
  expect(await image([])).toMatch(/^mds:\d+\.\d+\.\d+/);
  expect(await image(["image.repository=registry.example.com/mds", `image.digest=${digest}`])).toBe(`registry.example.com/mds@${digest}`);
});

it("keeps every rendered object's kind and name unique", async () => {
  const objects = await template(["namespace.create=true", "monitoring.enabled=true", "service.enabled=true"]);
  const keys = objects.map((o) => `${o.apiVersion} ${describeObject(o)}`);
  expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
  expect(isDeepStrictEqual(keys, [...new Set(keys)])).toBe(true);
});
