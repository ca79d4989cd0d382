import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevkube, type Devkube } from "@mds/devkube";
import { runKubectl } from "../support/kubectl.ts";
import { serviceWebhook, type WebhookProcess } from "../support/webhook-process.ts";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType, ProjectType } from "../../src/resources/types.ts";
import { eventually, manifests, namespaceFlagNeeded, realClusterFromEnv, startStack, type Stack } from "./helpers.ts";

// The MDS_E2E_KUBECONFIG path of startStack() (docs/e2e.md), proven without a real cluster: a devkube started
// here stands in for "some cluster with a kubeconfig", and the stack must treat it as one: CRDs applied
// server-side, a mds-e2e-<random> namespace holding everything (plus the extra namespaces a test asks for), an
// operator watching only those, every one of them gone at the end and the CRDs kept.

let cluster: Devkube;
let dir: string;
let stack: Stack | undefined;
let webhook: WebhookProcess | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-e2e-cluster-"));
  // A cluster mds is installed on runs the conversion webhook the CRDs name (docs/e2e.md): so does this one.
  const at = await serviceWebhook();
  cluster = await startDevkube({ dir, port: 0, services: at.services });
  for (const args of [
    ["create", "namespace", "mds-system"],
    ["apply", "-f", crdsDir],
  ]) {
    const r = await clusterKubectl(args);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  }
  webhook = await at.start(cluster.kubeconfigPath);
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  await webhook?.stop();
  await cluster?.stop();
  await rm(dir, { recursive: true, force: true });
});

const crdsDir = path.resolve(import.meta.dirname, "../../crds");

async function clusterKubectl(args: string[]) {
  return runKubectl(cluster.kubeconfigPath, args, { cacheDir: path.join(dir, "kubectl-cache") });
}

describe("real-cluster mode (MDS_E2E_KUBECONFIG)", () => {
  it("reads the switch from the environment", () => {
    expect(realClusterFromEnv({})).toBeUndefined();
    expect(realClusterFromEnv({ MDS_E2E_KUBECONFIG: "" })).toBeUndefined();
    expect(realClusterFromEnv({ MDS_E2E_KUBECONFIG: "/k" })).toEqual({
      kubeconfigPath: "/k",
      context: undefined,
      keepNamespaces: false,
    });
    expect(
      realClusterFromEnv({ MDS_E2E_KUBECONFIG: "/k", MDS_E2E_CONTEXT: "kind-mds-e2e", MDS_E2E_KEEP_NAMESPACES: "1" }),
    ).toEqual({
      kubeconfigPath: "/k",
      context: "kind-mds-e2e",
      keepNamespaces: true,
    });
  });

  it("adds --namespace to kubectl only where neither the command nor every object of its input names one", () => {
    expect(namespaceFlagNeeded(["get", "mdsdb"])).toBe(true);
    for (const own of [["-n", "x"], ["-nx"], ["--namespace", "x"], ["--namespace=x"], ["-A"], ["--all-namespaces"]]) {
      expect(namespaceFlagNeeded(["get", "mdsdb", ...own])).toBe(false);
    }
    const inNs = (namespace?: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", ...(namespace === undefined ? {} : { namespace }) },
    });
    expect(namespaceFlagNeeded(["apply", "-f", "-"], manifests(inNs("a"), inNs("b")))).toBe(false);
    expect(namespaceFlagNeeded(["create", "-f", "-"], JSON.stringify(inNs("a")))).toBe(false);
    expect(
      namespaceFlagNeeded(
        ["apply", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "List", items: [inNs("a"), inNs("b")] }),
      ),
    ).toBe(false);
    // One object without a namespace: it belongs in the test's namespace, so the flag stays (and kubectl refuses a mix).
    expect(namespaceFlagNeeded(["apply", "-f", "-"], manifests(inNs("a"), inNs()))).toBe(true);
    expect(namespaceFlagNeeded(["apply", "-f", "-"], "")).toBe(true);
    expect(namespaceFlagNeeded(["apply", "-f", "-"], "{ not yaml")).toBe(true);
  });

  it("refuses a namespace role that cannot become a namespace name, and one it was not asked for", async () => {
    await expect(
      startStack({ realCluster: { kubeconfigPath: cluster.kubeconfigPath }, namespaces: ["Team_A"] }),
    ).rejects.toThrow(/namespace role "Team_A" must be a distinct DNS label/);
    await expect(
      startStack({ realCluster: { kubeconfigPath: cluster.kubeconfigPath }, namespaces: ["a", "a"] }),
    ).rejects.toThrow(/namespace role "a" must be a distinct/);
  });

  it("refuses a kubeconfig it cannot use, naming the variable and the cause", async () => {
    await expect(startStack({ realCluster: { kubeconfigPath: path.join(dir, "missing") } })).rejects.toThrow(
      /^cannot run the e2e suite on MDS_E2E_KUBECONFIG ".*missing": .*ENOENT/,
    );
    await expect(
      startStack({ realCluster: { kubeconfigPath: cluster.kubeconfigPath, context: "nope" } }),
    ).rejects.toThrow(/MDS_E2E_CONTEXT "nope"\): .*nope/);
  });

  it("skips the tests that need devkube's hooks, naming the hook, and only those", async () => {
    // Only collecting: a -t filter leaves every test of the file skipped, so its beforeAll (the stack) never runs.
    const root = path.resolve(import.meta.dirname, "../..");
    const outputFile = path.join(dir, "guards.json");
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("VITEST")));
    await promisify(execFile)(
      process.execPath,
      [
        path.join(root, "node_modules/vitest/vitest.mjs"),
        "run",
        "test/e2e/guards.test.ts",
        "-t",
        "watch interruptions",
        "--reporter=json",
        `--outputFile=${outputFile}`,
      ],
      { cwd: root, env: { ...env, MDS_E2E_KUBECONFIG: cluster.kubeconfigPath } },
    );
    const report = JSON.parse(await readFile(outputFile, "utf8")) as {
      testResults: { assertionResults: { status: string; title: string }[] }[];
    };
    const results = report.testResults.flatMap((r) => r.assertionResults);
    const marked = results.filter((r) => r.title.includes("[skipped on a real cluster: needs devkube's"));
    expect(marked.map((r) => [r.status, r.title.replace(/^.*\[/, "[")])).toEqual([
      [
        "skipped",
        "[skipped on a real cluster: needs devkube's closeWatches() and setWatchHistoryLimit() to end every watch and expire its history on demand]",
      ],
    ]);
    expect(results.length).toBeGreaterThan(marked.length);
  }, 30_000);

  it("uses the given cluster: apply → Ready → the Secret connects, all in its own namespaces, removed at the end", async () => {
    const s = await startStack({ realCluster: { kubeconfigPath: cluster.kubeconfigPath }, namespaces: ["apps"] });
    stack = s;
    expect(s.devkube).toBeUndefined();
    expect(s.namespace).toMatch(/^mds-e2e-[0-9a-f]{8}$/);
    const apps = s.namespaceOf("apps");
    expect(s.namespaces).toEqual([s.namespace, `${s.namespace}-apps`]);
    expect(apps).toBe(`${s.namespace}-apps`);
    expect(() => s.namespaceOf("other")).toThrow(
      /no namespace for role "other": ask for it with startStack\(\{ namespaces: \["other"\] \}\)/,
    );
    for (const ns of s.namespaces) {
      expect(
        (
          await clusterKubectl([
            "get",
            "namespace",
            ns,
            "-o",
            "jsonpath={.metadata.labels.app\\.kubernetes\\.io/created-by}",
          ])
        ).stdout,
      ).toBe("mds-e2e");
    }
    await s.startOperator();
    await s.kubectl(
      ["apply", "-f", "-"],
      manifests(
        { apiVersion: "mds.dev/v1alpha1", kind: "Project", metadata: { name: "shop" }, spec: { region: "us-east-1" } },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "orders" },
          spec: { projectRef: { name: "shop" } },
        },
      ),
    );
    await eventually(
      async () => {
        const status = (await s.kube.get<KubeObject>(DatabaseType, s.namespace, "orders"))?.["status"] as
          { conditions?: { type: string; status: string }[] } | undefined;
        if (!status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
          throw new Error(`not ready: ${JSON.stringify(status)}`);
      },
      { what: "orders Ready" },
    );
    const secret = await s.kube.get<Secret>(SecretType, s.namespace, "orders");
    const client = new pg.Client({ connectionString: decodeData(secret!)["DATABASE_URL"]! });
    await client.connect();
    expect((await client.query<{ one: number }>("select 1 as one")).rows[0]!.one).toBe(1);
    await client.end();
    // The extra namespace, through the same kubectl: objects naming their own namespace are not forced into the
    // main one, and the operator serves it (with the namespace's own token).
    await s.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "mds-credentials", namespace: apps },
          stringData: { token: s.service.token },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "billing", namespace: apps },
          spec: { region: "us-east-1" },
        },
      ),
    );
    await eventually(
      async () => {
        const status = (await s.kube.get<KubeObject>(ProjectType, apps, "billing"))?.["status"] as
          { conditions?: { type: string; status: string }[] } | undefined;
        if (!status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
          throw new Error(`not ready: ${JSON.stringify(status)}`);
      },
      { what: "billing Ready in the extra namespace" },
    );
    // Nothing of the test landed in "default".
    expect((await clusterKubectl(["get", "mdsdb,mdsproject", "-n", "default", "-o", "name"])).stdout.trim()).toBe("");

    stack = undefined;
    await s.stop();
    // Every namespace of the test goes entirely: the finalizers the stopped operator left (on the resources and on
    // the credentials Secrets) were dropped, so none stays Terminating.
    for (const ns of s.namespaces) {
      await eventually(
        async () => {
          const got = await clusterKubectl(["get", "namespace", ns, "-o", "jsonpath={.status.phase}"]);
          if (got.code === 0 || !/NotFound/.test(got.stderr))
            throw new Error(`namespace ${ns} still there: ${got.stdout}${got.stderr}`);
        },
        { what: `namespace ${ns} gone` },
      );
    }
    const crds = await clusterKubectl(["get", "crd", "databases.mds.dev", "-o", "name"]);
    expect(crds.code).toBe(0);
  }, 60_000);
});
