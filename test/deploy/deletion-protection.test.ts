// spec.deletionProtection end to end with the real kubectl 1.32 on devkube: the CRDs and the ValidatingAdmissionPolicy +
// binding exactly as `kubectl kustomize deploy` renders them, then `kubectl delete` of protected and unprotected
// Databases and Projects. The operator does not run: the objects carry no finalizer, so a delete that is admitted
// removes them at once.
import { mkdtemp, rm } from "node:fs/promises";
import { crdDefinitions } from "../../src/resources/crd-files.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { startDevkube, type Devkube } from "@mds/devkube";
import { kubectl, type KubectlResult } from "./kubectl.ts";

let devkube: Devkube;
let dir: string;
/** The CRDs and the policy objects of `kubectl kustomize deploy`, as applied. */
let installed: string;
const k = (args: string[], input?: string): Promise<KubectlResult> => kubectl(args, { kubeconfig: devkube.kubeconfigPath, ...(input === undefined ? {} : { input }) });
const ok = async (args: string[], input?: string): Promise<string> => {
  const r = await k(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
};
const database = (name: string, spec: Record<string, unknown> = {}) => ({ apiVersion: "mds.dev/v1beta1", kind: "Database", metadata: { name, namespace: "shop" }, spec: { projectId: "proj_abcdefgh1234", ...spec } });
const project = (name: string, spec: Record<string, unknown> = {}) => ({ apiVersion: "mds.dev/v1beta1", kind: "Project", metadata: { name, namespace: "shop" }, spec });
const apply = (...objects: object[]) => ok(["apply", "-f", "-"], objects.map((o) => stringify(o)).join("---\n"));
const refusal = (resource: string, name: string) =>
  `Error from server (Forbidden): ${resource}.mds.dev "${name}" is forbidden: ValidatingAdmissionPolicy 'mds-deletion-protection' with binding 'mds-deletion-protection' denied request: ` +
  `spec.deletionProtection is true: set it to false first (kubectl patch ${resource}.mds.dev ${name} -n shop --type=merge -p '{"spec":{"deletionProtection":false}}'), then delete\n`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mds-deletion-protection-"));
  devkube = await startDevkube({ dir });
  const rendered = await kubectl(["kustomize", "deploy"]);
  if (rendered.code !== 0) throw new Error(`kubectl kustomize deploy failed: ${rendered.stderr}`);
  const objects = parseAllDocuments(rendered.stdout).map((d) => d.toJS() as { kind: string });
  const wanted = objects.filter((o) => ["CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"].includes(o.kind));
  expect(wanted.map((o) => o.kind).sort()).toEqual([...crdDefinitions.map(() => "CustomResourceDefinition"), "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
  installed = wanted.map((o) => stringify(o)).join("---\n");
  await ok(["apply", "-f", "-"], installed);
  await ok(["wait", "--for=condition=Established", "crd/databases.mds.dev", "crd/projects.mds.dev"]);
  await ok(["create", "namespace", "shop"]);
});

afterAll(async () => {
  await devkube?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe("spec.deletionProtection with deploy/'s ValidatingAdmissionPolicy", () => {
  it("refuses `kubectl delete` of a protected Database, saying how to turn it off; after the patch the delete succeeds", async () => {
    await apply(database("orders", { deletionProtection: true }));
    const refused = await k(["-n", "shop", "delete", "database", "orders"]);
    expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }).toEqual({ code: 1, stdout: "", stderr: refusal("databases", "orders") });
    // a server-side dry run is judged the same way, and the object is still there
    const dry = await k(["-n", "shop", "delete", "database", "orders", "--dry-run=server"]);
    expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 1, stderr: refusal("databases", "orders") });
    expect(await ok(["-n", "shop", "get", "database", "orders", "-o", "jsonpath={.spec.deletionProtection}"])).toBe("true");

    // the command the message gives, verbatim
    await ok(["-n", "shop", "patch", "databases.mds.dev", "orders", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
    const deleted = await k(["-n", "shop", "delete", "database", "orders"]);
    expect({ code: deleted.code, stdout: deleted.stdout, stderr: deleted.stderr }).toEqual({ code: 0, stdout: 'database.mds.dev "orders" deleted\n', stderr: "" });
    expect((await k(["-n", "shop", "get", "database", "orders"])).code).toBe(1);
  });

  it("deletes a Database without the field (defaulted to false) normally", async () => {
    await apply(database("scratch"));
    expect(await ok(["-n", "shop", "get", "database", "scratch", "-o", "jsonpath={.spec.deletionProtection}"])).toBe("false");
    const deleted = await k(["-n", "shop", "delete", "database", "scratch"]);
    expect({ code: deleted.code, stdout: deleted.stdout, stderr: deleted.stderr }).toEqual({ code: 0, stdout: 'database.mds.dev "scratch" deleted\n', stderr: "" });
  });

  it("protects Projects too, and `kubectl delete -f` (a prune) deletes only the unprotected", async () => {
    await apply(project("keep", { deletionProtection: true }), project("drop"), database("kept", { deletionProtection: true }));
    const manifests = [project("keep"), project("drop"), database("kept")].map((o) => stringify(o)).join("---\n");
    const r = await k(["delete", "-f", "-"], manifests);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('project.mds.dev "drop" deleted\n');
    expect(r.stderr).toContain(`Error from server (Forbidden): error when deleting "STDIN": projects.mds.dev "keep" is forbidden: ValidatingAdmissionPolicy 'mds-deletion-protection'`);
    expect(r.stderr).toContain(`databases.mds.dev "kept" is forbidden`);
    expect((await ok(["-n", "shop", "get", "mds", "-o", "name"])).split("\n").filter(Boolean).sort()).toEqual(["database.mds.dev/kept", "project.mds.dev/keep"]);
    await ok(["-n", "shop", "patch", "project", "keep", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
    await ok(["-n", "shop", "patch", "database", "kept", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
    await ok(["delete", "-f", "-"], [project("keep"), database("kept")].map((o) => stringify(o)).join("---\n"));
    expect(await ok(["-n", "shop", "get", "mds", "-o", "name"])).toBe("");
  });

  it("protects Connections too", async () => {
    const connection = { apiVersion: "mds.dev/v1beta1", kind: "Connection", metadata: { name: "reporting", namespace: "shop" }, spec: { databaseRef: { name: "orders" }, deletionProtection: true } };
    await apply(connection);
    const refused = await k(["-n", "shop", "delete", "connection", "reporting"]);
    expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: refusal("connections", "reporting") });
    await ok(["-n", "shop", "patch", "connections.mds.dev", "reporting", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
    expect((await k(["-n", "shop", "delete", "connection", "reporting"])).code).toBe(0);
  });

  it("re-applies unchanged (no server default the manifests leave out flips `kubectl apply` to configured)", async () => {
    const r = await k(["apply", "-f", "-"], installed);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
    expect(r.stdout).toContain("validatingadmissionpolicy.admissionregistration.k8s.io/mds-deletion-protection unchanged\n");
    expect(r.stdout).toContain("validatingadmissionpolicybinding.admissionregistration.k8s.io/mds-deletion-protection unchanged\n");
  });

  it("keeps the namespace of a protected Database Terminating until protection is turned off", async () => {
    await ok(["create", "namespace", "doomed"]);
    await apply({ ...database("precious", { deletionProtection: true }), metadata: { name: "precious", namespace: "doomed" } });
    await ok(["delete", "namespace", "doomed", "--wait=false"]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await ok(["get", "namespace", "doomed", "-o", "jsonpath={.status.phase}"])).toBe("Terminating");
    expect(await ok(["-n", "doomed", "get", "database", "precious", "-o", "name"])).toBe("database.mds.dev/precious\n");
    await ok(["-n", "doomed", "patch", "database", "precious", "--type=merge", "-p", '{"spec":{"deletionProtection":false}}']);
    await ok(["wait", "--for=delete", "namespace/doomed", "--timeout=20s"]);
  });
});
