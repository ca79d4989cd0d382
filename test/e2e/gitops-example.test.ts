import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { kubectlPath } from "@mds/devkube/kubectl-path";
import { helm } from "../deploy/helm.ts";
import { kstatusOf } from "../support/kstatus.ts";
import { gitopsCrds } from "./gitops-crds.ts";
import { counterparts, itNeedsDevkube, onRealCluster, startStack, type Stack } from "./helpers.ts";

// examples/gitops as a platform team copies it: the Flux Kustomizations (wait, healthChecks, dependsOn on the
// Project) and the Argo CD Application installing the operator from the chart. Each is rendered as its tool renders
// it (the real `kubectl kustomize` over a Kustomization's path; the real `helm template --include-crds` with the
// Application's values) and accepted by a server-side dry-run, the tools' own objects against stand-ins of their
// CRDs (gitops-crds.ts). Then, against both API counterparts, what Flux waits on is read with kstatus
// (test/support/kstatus.ts) as kustomize-controller reads it: InProgress while no operator has looked, Current
// once usable, and the Kustomization that dependsOn the Project applied only then.

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, "../..");
const gitops = path.join(root, "examples/gitops");

type Json = Record<string, unknown>;
interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Json;
}
interface Kustomization extends Obj {
  spec: {
    path: string;
    targetNamespace: string;
    wait?: boolean;
    dependsOn?: { name: string }[];
    healthChecks?: { apiVersion: string; kind: string; name: string; namespace: string }[];
    sourceRef: { kind: string; name: string };
  };
}
interface Application extends Obj {
  spec: {
    source: { repoURL: string; path: string; helm: { releaseName: string; valuesObject: Json } };
    destination: { namespace: string };
    syncPolicy: { syncOptions: string[]; managedNamespaceMetadata: { labels: Record<string, string> } };
  };
}

const docsOf = async (file: string) =>
  parseAllDocuments(await readFile(path.join(gitops, file), "utf8")).map((d) => d.toJS() as Obj);
const fluxDocs = () => docsOf("flux/kustomizations.yaml");
const kustomizations = async () => (await fluxDocs()).filter((d): d is Kustomization => d.kind === "Kustomization");

/** What kustomize-controller applies for a Kustomization: `kustomize build` of its path in the source (this repo). */
async function rendered(k: Kustomization): Promise<Obj[]> {
  const { stdout } = await run(await kubectlPath(), ["kustomize", path.join(root, k.spec.path)]);
  return parseAllDocuments(stdout).map((d) => d.toJS() as Obj);
}

/** What Flux waits on before the Kustomization is Ready: everything applied with `wait`, else its healthChecks. */
async function waitedOn(k: Kustomization): Promise<{ kind: string; name: string }[]> {
  if (k.spec.wait === true) return (await rendered(k)).map((o) => ({ kind: o.kind, name: o.metadata.name }));
  return (k.spec.healthChecks ?? []).map((h) => ({ kind: h.kind, name: h.name }));
}

describe("examples/gitops rendered and dry-run on the server", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
    if (onRealCluster) return;
    await stack.kubectl(["apply", "-f", "-"], gitopsCrds);
    // mds-system exists already: the stack runs the conversion webhook there.
    for (const ns of ["flux-system", "argocd", "shop"]) await stack.kubectl(["create", "namespace", ns]);
    await stack.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const serverDryRun = async (args: string[], input: string) => {
    const out = await stack.kubectl(["apply", "--dry-run=server", ...args, "-f", "-"], input);
    expect(out).toContain("(server dry run)");
    return out;
  };

  itNeedsDevkube(
    "the Flux Kustomizations and what each applies are accepted; healthChecks, dependsOn and sourceRef name what exists",
    "a cluster of its own for the stand-ins of Flux's CRDs",
    async () => {
      const docs = await fluxDocs();
      await serverDryRun([], docs.map((d) => stringify(d)).join("---\n"));

      // The stand-ins bite: a misspelt field or a wrong type is refused, as the real CRDs refuse it.
      const [, first] = docs;
      const typo = { ...first!, spec: { ...first!.spec, healthCheck: [] } };
      await expect(serverDryRun([], stringify(typo))).rejects.toThrow(/unknown field "spec.healthCheck"/);
      const wrongType = { ...first!, spec: { ...first!.spec, interval: "ten minutes" } };
      await expect(serverDryRun([], stringify(wrongType))).rejects.toThrow(/spec.interval/);

      const names = docs.map((d) => `${d.kind}/${d.metadata.name}`);
      for (const k of await kustomizations()) {
        expect(names).toContain(`${k.spec.sourceRef.kind}/${k.spec.sourceRef.name}`);
        for (const dep of k.spec.dependsOn ?? []) expect(names).toContain(`Kustomization/${dep.name}`);
        const objects = await rendered(k);
        expect(objects.length).toBeGreaterThan(0);
        // targetNamespace: the objects carry none of their own, Flux sets it.
        expect(objects.map((o) => o.metadata.namespace)).toEqual(objects.map(() => undefined));
        await serverDryRun(["-n", k.spec.targetNamespace], objects.map((o) => stringify(o)).join("---\n"));
        for (const h of k.spec.healthChecks ?? []) {
          expect(h.namespace).toBe(k.spec.targetNamespace);
          expect(objects.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata.name}`)).toContain(
            `${h.apiVersion} ${h.kind}/${h.name}`,
          );
        }
        // Flux ignores healthChecks when wait is set: one or the other.
        expect(k.spec.wait === true && k.spec.healthChecks !== undefined).toBe(false);
      }
      // The Databases' Kustomization waits for the Project's.
      const [project, databases] = await kustomizations();
      expect((await rendered(project!)).map((o) => o.kind)).toEqual(["Project"]);
      expect(databases!.spec.dependsOn).toEqual([{ name: project!.metadata.name }]);
    },
    120_000,
  );

  itNeedsDevkube(
    "the Argo CD Application and the chart as it renders it (helm template --include-crds) are accepted",
    "a cluster of its own for the stand-in of Argo CD's CRD",
    async () => {
      const [app] = (await docsOf("argocd/application.yaml")) as Application[];
      await serverDryRun([], stringify(app));
      const { source, destination, syncPolicy } = app!.spec;
      expect((await stat(path.join(root, source.path, "Chart.yaml"))).isFile()).toBe(true);
      const dir = await mkdtemp(path.join(os.tmpdir(), "mds-argocd-app-"));
      try {
        const values = path.join(dir, "values.yaml");
        await writeFile(values, stringify(source.helm.valuesObject));
        const template = await helm([
          "template",
          source.helm.releaseName,
          path.join(root, source.path),
          "-n",
          destination.namespace,
          "--include-crds",
          "-f",
          values,
        ]);
        expect({ code: template.code, stderr: template.stderr }).toEqual({ code: 0, stderr: "" });
        const objects = parseAllDocuments(template.stdout)
          .map((d) => d.toJS() as Obj | null)
          .filter((o): o is Obj => o !== null);
        expect(objects.filter((o) => o.kind === "CustomResourceDefinition")).toHaveLength(6);
        expect(
          objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "mds-operator-config")?.[
            "data" as keyof Obj
          ],
        ).toMatchObject({
          MDS_API_URL: "https://mds-api.example.com",
          MDS_INSTANCE_ID: "prod-eu-1",
        });
        // The helm test hook is no resource of a sync (Argo CD has no equivalent of helm test): left out.
        const synced = objects.filter((o) => o.kind !== "Pod");
        expect(syncPolicy.syncOptions).toContain("ServerSideApply=true");
        await serverDryRun(
          ["--server-side", "--field-manager=argocd-controller", "--force-conflicts"],
          synced.map((o) => stringify(o)).join("---\n"),
        );

        // The namespace Argo CD creates carries the labels the chart's own namespace would.
        const ns = await helm([
          "template",
          "mds",
          path.join(root, source.path),
          "-n",
          destination.namespace,
          "--set",
          "namespace.create=true",
          "--show-only",
          "templates/namespace.yaml",
        ]);
        const labels = (parseAllDocuments(ns.stdout)[0]!.toJS() as Obj).metadata.labels ?? {};
        const podSecurity = Object.fromEntries(
          Object.entries(labels).filter(([key]) => key.startsWith("pod-security.kubernetes.io/")),
        );
        expect(syncPolicy.managedNamespaceMetadata.labels).toEqual(podSecurity);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});

describe.each(counterparts)("what the Flux example waits on, read with kstatus, against %s", (counterpart) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
  }, 120_000);
  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  const kstatus = async (kind: string, name: string) =>
    kstatusOf(JSON.parse(await stack.kubectl(["get", `${kind.toLowerCase()}s.mds.dev`, name, "-o", "json"])) as Json);
  /** Applies what a Kustomization renders into the test's namespace (its targetNamespace here). */
  const apply = async (k: Kustomization) =>
    stack.kubectl(["apply", "-f", "-"], (await rendered(k)).map((o) => stringify(o)).join("---\n"));

  it("InProgress until the operator has looked, Current once usable; the dependent Kustomization applies after", async () => {
    const [project, databases] = await kustomizations();
    await apply(project!);
    const projectWaits = await waitedOn(project!);
    expect(projectWaits).toEqual([{ kind: "Project", name: "shop" }]);
    // No operator yet: the CRD's default status says so, and Flux would wait (not proceed, not fail).
    expect(await kstatus("Project", "shop")).toMatchObject({ status: "InProgress", reason: "AwaitingOperator" });

    await stack.startOperator();
    await stack.kubectl(["wait", "--for=condition=Ready", "projects.mds.dev/shop", "--timeout=120s"]);
    for (const w of projectWaits) expect(await kstatus(w.kind, w.name)).toMatchObject({ status: "Current" });

    // dependsOn: shop-databases only now, as Flux applies it once shop-project is Ready.
    await apply(databases!);
    const databaseWaits = await waitedOn(databases!);
    expect(databaseWaits).toEqual([{ kind: "Database", name: "orders" }]);
    await stack.kubectl(["wait", "--for=condition=Ready", "databases.mds.dev/orders", "--timeout=120s"]);
    for (const w of databaseWaits) expect(await kstatus(w.kind, w.name)).toMatchObject({ status: "Current" });
    // Current means what the app's Kustomization needs: the Secret is there.
    expect(await stack.kubectl(["get", "secret", "orders-db", "-o", "name"])).toBe("secret/orders-db\n");
  }, 300_000);
});
