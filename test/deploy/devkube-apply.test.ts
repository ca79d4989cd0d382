// `kubectl apply -k … --server-side --dry-run=server` against devkube: the API server accepts every object of
// every install (schema, defaulting, RBAC objects, CRDs, workloads) without changing anything.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import { kubectl } from "./kubectl.ts";

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

describe.each(installs)("`kubectl apply -k %s --server-side --dry-run=server`", (install) => {
  it("is accepted by devkube for every object of the install, and changes nothing", async () => {
    const rendered = await kubectl(["kustomize", install]);
    expect(rendered.stderr).toBe("");
    const objects = parseAllDocuments(rendered.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(["Deployment", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]));
    const result = await k(["apply", "-k", install, "--server-side", "--dry-run=server", "--field-manager=mds-install"]);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
    const lines = result.stdout.trim().split("\n");
    expect(lines).toHaveLength(objects.length);
    for (const line of lines) expect(line).toMatch(/ serverside-applied \(server dry run\)$/);
    // Nothing was created: the CRDs are still unknown, and so are the workloads.
    const crds = await k(["get", "crd", "-o", "name"]);
    expect(crds.stdout.trim()).toBe("");
    const workloads = await k(["get", "deployments,statefulsets,services,persistentvolumeclaims,poddisruptionbudgets,networkpolicies,validatingadmissionpolicies,validatingadmissionpolicybindings", "-A", "-o", "name"]);
    expect({ code: workloads.code, stdout: workloads.stdout.trim() }).toEqual({ code: 0, stdout: "" });
  });
});

it("devkube serves every kind of the installs", async () => {
  const resources = await k(["api-resources", "-o", "name"]);
  expect(resources.code).toBe(0);
  const served = resources.stdout.split("\n");
  for (const plural of ["deployments.apps", "statefulsets.apps", "services", "persistentvolumeclaims", "poddisruptionbudgets.policy", "networkpolicies.networking.k8s.io", "customresourcedefinitions.apiextensions.k8s.io", "validatingadmissionpolicies.admissionregistration.k8s.io", "validatingadmissionpolicybindings.admissionregistration.k8s.io"]) {
    expect({ plural, served: served.includes(plural) }).toEqual({ plural, served: true });
  }
});
