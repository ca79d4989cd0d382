import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./helpers.ts";
import { runKubectl } from "../support/kubectl.ts";

// ServiceAccount tokens and RBAC: a token from TokenRequest acts as the ServiceAccount, Roles and
// bindings decide, the admin token bypasses (system:masters) and may impersonate.

let h: Harness;
let saKubeconfig: string;
let token: string;

const asSa = (args: string[]) => runKubectl(saKubeconfig, args, { cacheDir: `${h.dir}/sa-cache` });

beforeAll(async () => {
  h = await startHarness();
  await h.ok(["create", "namespace", "other"]);
  await h.ok(["create", "serviceaccount", "op"]);
  token = (await h.ok(["create", "token", "op"])).trim();
  saKubeconfig = await h.file("sa-kubeconfig", h.devkube.kubeconfig.replace(h.devkube.token, token));
});
afterAll(async () => {
  await h?.close();
});

describe("RBAC", () => {
  it("forbids a ServiceAccount without bindings, in kube's words", async () => {
    expect(token.length).toBeGreaterThan(20);
    expect((await asSa(["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"])).stdout).toBe(
      "system:serviceaccount:default:op",
    );
    const r = await asSa(["get", "configmaps"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:default:op" cannot list resource "configmaps" in API group "" in the namespace "default"',
    );
  });

  it("allows what a Role bound in the namespace grants, and nothing more", async () => {
    await h.ok(["create", "role", "cm-reader", "--verb=get,list,watch", "--resource=configmaps"]);
    await h.ok(["create", "rolebinding", "op-cm", "--role=cm-reader", "--serviceaccount=default:op"]);
    await h.ok(["create", "configmap", "c1", "--from-literal=a=b"]);
    expect((await asSa(["get", "configmaps", "-o", "name"])).stdout).toContain("configmap/c1");
    expect((await asSa(["get", "secrets"])).stderr).toContain("Forbidden");
    expect((await asSa(["get", "configmaps", "-n", "other"])).stderr).toContain('in the namespace "other"');
    expect((await asSa(["delete", "configmap", "c1"])).stderr).toContain('cannot delete resource "configmaps"');
  });

  it("applies ClusterRoleBindings cluster-wide, including subresources", async () => {
    await h.ok(["create", "clusterrolebinding", "op-view", "--clusterrole=view", "--serviceaccount=default:op"]);
    expect((await asSa(["get", "namespaces", "-o", "name"])).stdout).toContain("namespace/other");
    await h.ok(["create", "clusterrole", "lease-status", "--verb=patch", "--resource=leases/status,leases"]);
    const before = await h.kubectl(["auth", "can-i", "patch", "leases", "--as=system:serviceaccount:default:op"]);
    expect([before.code, before.stdout]).toEqual([1, "no\n"]);
    await h.ok([
      "create",
      "clusterrolebinding",
      "op-lease",
      "--clusterrole=lease-status",
      "--serviceaccount=default:op",
    ]);
    expect(await h.ok(["auth", "can-i", "patch", "leases", "--as=system:serviceaccount:default:op"])).toBe("yes\n");
    expect((await asSa(["auth", "can-i", "list", "configmaps", "-n", "default"])).stdout).toBe("yes\n");
    expect((await asSa(["auth", "can-i", "list", "secrets"])).stdout).toBe("no\n");
    const list = await asSa(["auth", "can-i", "--list", "-n", "default"]);
    expect(list.stdout).toMatch(/configmaps\s+\[\]\s+\[\]\s+\[get list watch\]/);
  });

  it("works with client-node and rejects the token once its ServiceAccount is gone", async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromString(h.devkube.kubeconfig.replace(h.devkube.token, token));
    const core = kc.makeApiClient(k8s.CoreV1Api);
    expect((await core.listNamespacedConfigMap({ namespace: "default" })).items.map((c) => c.metadata?.name)).toContain(
      "c1",
    );
    await expect(core.listNamespacedSecret({ namespace: "default" })).rejects.toMatchObject({ code: 403 });
    await h.ok(["delete", "serviceaccount", "op"]);
    await expect(core.listNamespacedConfigMap({ namespace: "default" })).rejects.toMatchObject({ code: 401 });
  });
});
