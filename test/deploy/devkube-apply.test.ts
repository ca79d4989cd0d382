// `kubectl apply -k … --server-side --dry-run=server` against devkube: the API server accepts every object of
// every install (schema, defaulting, RBAC objects, CRDs) without changing anything.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { startDevkube, type Devkube } from "../../src/devkube/index.ts";
import { kubectl } from "./kubectl.ts";

// Kinds of the installs that devkube does not serve yet (it is a dev server, not a kube-apiserver). The dry run
// covers every other object; a test below fails as soon as devkube serves one of these, so it joins the dry run.
const notServedByDevkube = ["Deployment", "StatefulSet", "Service", "PersistentVolumeClaim", "PodDisruptionBudget", "NetworkPolicy"];

const installs = ["deploy", "deploy/overlays/single-namespace", "deploy/overlays/with-service"];

let devkube: Devkube;
let dir: string;
const k = (args: string[], input?: string) => kubectl(args, { kubeconfig: devkube.kubeconfigPath, ...(input === undefined ? {} : { input }) });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mds-deploy-devkube-"));
  devkube = await startDevkube({ dir });
  // A dry run creates nothing, so the namespace must exist for the namespaced objects (as on a real cluster).
  const ns = await k(["create", "namespace", "mds-system"]);
  if (ns.code !== 0) throw new Error(`cannot create namespace mds-system: ${ns.stderr}`);
});

afterAll(async () => {
  await devkube?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe.each(installs)("the output of `kubectl kustomize %s`, applied with --server-side --dry-run=server", (install) => {
  it("is accepted by devkube for every object of a kind it serves, and changes nothing", async () => {
    const rendered = await kubectl(["kustomize", install]);
    expect(rendered.stderr).toBe("");
    const objects = parseAllDocuments(rendered.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    const served = objects.filter((o) => !notServedByDevkube.includes(o.kind));
    const input = served.map((o) => stringify(o)).join("---\n");
    const result = await k(["apply", "--server-side", "--dry-run=server", "--field-manager=mds-install", "-f", "-"], input);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
    const lines = result.stdout.trim().split("\n");
    expect(lines).toHaveLength(served.length);
    for (const line of lines) expect(line).toMatch(/ serverside-applied \(server dry run\)$/);
    // Nothing was created: the CRDs are still unknown.
    const crds = await k(["get", "crd", "-o", "name"]);
    expect(crds.stdout.trim()).toBe("");
  });
});

it("devkube still lacks exactly the kinds left out of the dry run (serve one, and remove it from the list)", async () => {
  const resources = await k(["api-resources", "-o", "name"]);
  expect(resources.code).toBe(0);
  const served = resources.stdout.split("\n");
  const plural: Record<string, string> = {
    Deployment: "deployments.apps",
    StatefulSet: "statefulsets.apps",
    Service: "services",
    PersistentVolumeClaim: "persistentvolumeclaims",
    PodDisruptionBudget: "poddisruptionbudgets.policy",
    NetworkPolicy: "networkpolicies.networking.k8s.io",
  };
  for (const kind of notServedByDevkube) expect({ kind, served: served.includes(plural[kind] ?? kind) }).toEqual({ kind, served: false });
});
