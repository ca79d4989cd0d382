import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeFetch } from "../../src/kube/client.ts";
import type { KubeObject } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { customizationsDir } from "../deploy/argocd-cm.ts";
import { requireLua, runHealthScript } from "../deploy/lua.ts";
import { argoAgrees, kstatusOf, type KStatus } from "../support/kstatus.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// GitOps readers of status: a Database and a DatabaseRestore walked through every state they pass,
// against devkube and both counterparts, with kstatus computed as sigs.k8s.io/cli-utils does (test/support/kstatus.ts)
// on the objects as the apiserver serves them, and the Argo CD health scripts run on the same objects. Every version
// the watch delivers is checked, so a state that lasts one write is checked when it is seen; the states the test
// requires are those it holds (no operator running, a crash) or waits for, never one it must catch in passing.

type Obj = KubeObject & {
  spec?: Record<string, unknown>;
  status?: { conditions?: { type: string; status: string; reason: string }[]; [k: string]: unknown };
};

/** Every version of every Database and DatabaseRestore in the namespace, in the order the watch delivered them. */
function recordVersions(stack: Stack) {
  const versions: { plural: string; obj: Obj }[] = [];
  const abort = new AbortController();
  const watch = async (plural: string, open: () => void) => {
    const res = await kubeFetch(
      stack.kubeConfig,
      `watch ${plural}`,
      "GET",
      `/apis/mds.dev/v1alpha1/namespaces/${stack.namespace}/${plural}`,
      { watch: "true" },
      { watch: true, signal: abort.signal },
    );
    open();
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim() === "") continue;
        const event = JSON.parse(line) as { type: string; object: Obj };
        if (event.type === "ADDED" || event.type === "MODIFIED") versions.push({ plural, obj: event.object });
      }
    }
  };
  // Both watches are open before the test writes anything, so none of its objects is first seen later.
  const opened: Promise<void>[] = [];
  for (const plural of ["databases", "databaserestores"]) {
    let open: () => void = () => {};
    opened.push(new Promise((resolve) => (open = resolve)));
    watch(plural, open).catch(() => open());
  }
  return {
    opened: Promise.all(opened),
    versions,
    of: (plural: string, name: string) =>
      versions.filter((v) => v.plural === plural && v.obj.metadata.name === name).map((v) => v.obj),
    stop: () => abort.abort(),
  };
}

const condition = (obj: Obj | undefined, type: string) => obj?.status?.conditions?.find((c) => c.type === type);
const healthScript = (kind: string) => join(customizationsDir, "mds.dev", kind, "health.lua");

describe.each(counterparts)("kstatus and Argo CD agree on every state against %s", (api) => {
  let stack: Stack;
  let operator: Operator | undefined;
  let recorder: ReturnType<typeof recordVersions>;

  beforeAll(async () => {
    requireLua();
    stack = await startStack({ api });
    recorder = recordVersions(stack);
    await recorder.opened;
  });
  afterAll(async () => {
    recorder?.stop();
    await operator?.stop();
    await stack?.stop();
  });

  const get = async (plural: "mdsdb" | "mdsrestore", name: string) =>
    JSON.parse(await stack.kubectl(["get", plural, name, "-o", "json"])) as Obj;
  const kstatus = async (plural: "mdsdb" | "mdsrestore", name: string) => kstatusOf(await get(plural, name));
  const expectKstatus = async (plural: "mdsdb" | "mdsrestore", name: string, status: KStatus, what: string) =>
    eventually(async () => expect({ name, status: (await kstatus(plural, name)).status }).toEqual({ name, status }), {
      what: `${name} ${status} (${what})`,
      timeoutMs: 60_000,
    });
  const db = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: stack.namespace },
    spec,
  });
  const serviceApi = async (method: string, path: string) => {
    const res = await fetch(`${stack.service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    return (await res.json()) as { data: unknown };
  };

  it("walks creating, waiting, ready, rotating, restoring, stalled and deleting: InProgress, Current, Failed, Terminating", async () => {
    // Applied while no operator runs (it is down, or has not looked yet): not Current, or Flux's wait would pass.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "shop", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        db("orders", {
          projectRef: { name: "shop" },
          deletionPolicy: "Delete",
          connectionSecret: { name: "orders-db" },
        }),
        db("early", { projectRef: { name: "later" }, deletionPolicy: "Delete" }),
        db("nocreds", {
          projectRef: { name: "shop" },
          deletionPolicy: "Delete",
          credentials: { secretRef: { name: "team-token" } },
        }),
      ),
    );
    for (const name of ["orders", "early", "nocreds"])
      expect({ name, before: (await kstatus("mdsdb", name)).status }).toEqual({ name, before: "InProgress" });

    operator = await stack.startOperator();
    // Waiting for its project, and for its credentials Secret.
    await eventually(
      async () => expect(condition(await get("mdsdb", "early"), "Synced")?.reason).toBe("ProjectNotReady"),
      { what: "early waits for its project" },
    );
    await eventually(
      async () => expect(condition(await get("mdsdb", "nocreds"), "Synced")?.reason).toBe("CredentialsMissing"),
      { what: "nocreds waits for its token" },
    );
    expect((await kstatus("mdsdb", "early")).status).toBe("InProgress");
    expect((await kstatus("mdsdb", "nocreds")).status).toBe("InProgress");
    // Creating, provisioning, then ready.
    await expectKstatus("mdsdb", "orders", "Current", "ready");
    expect(condition(await get("mdsdb", "orders"), "Ready")?.status).toBe("True");
    // What it waited for arrives: both become Current.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Project",
        metadata: { name: "later", namespace: stack.namespace },
        spec: { region: "us-east-1" },
      }),
    );
    await stack.kubectl(["create", "secret", "generic", "team-token", `--from-literal=token=${stack.service.token}`]);
    await expectKstatus("mdsdb", "early", "Current", "its project arrived");
    await expectKstatus("mdsdb", "nocreds", "Current", "its token arrived");

    // Rotating: an operator that dies after minting leaves the rotation pending in status; the next one finishes it.
    await operator.stop();
    let dead = false;
    operator = await stack.startOperator({
      canWrite: () => !dead,
      crashPoint: (name) => {
        if (name === "database:after-rotate-mint" && !dead) {
          dead = true;
          throw new Error("simulated crash after the rotation's mint");
        }
      },
    });
    await stack.kubectl(["annotate", "mdsdb", "orders", "mds.dev/rotate=first"]);
    await eventually(
      async () => expect((await get("mdsdb", "orders")).status?.["rotation"]).toHaveProperty("pending"),
      { what: "a pending rotation" },
    );
    expect(await kstatus("mdsdb", "orders")).toMatchObject({ status: "InProgress", reason: "Rotating" });
    await operator.stop();
    operator = await stack.startOperator();
    await eventually(
      async () => expect((await get("mdsdb", "orders")).status?.["rotation"]).not.toHaveProperty("pending"),
      { what: "the rotation finished" },
    );
    await expectKstatus("mdsdb", "orders", "Current", "rotated");

    // Restoring: Pending and Running are InProgress, Succeeded is Current; a refused restore is Failed.
    const ordersId = (await get("mdsdb", "orders")).status?.["id"] as string;
    await serviceApi("POST", `/v1/databases/${ordersId}/backups`);
    await eventually(
      async () => {
        const list = (await serviceApi("GET", `/v1/databases/${ordersId}/backups`)).data as { status: string }[];
        expect(list.some((b) => b.status === "completed")).toBe(true);
      },
      { what: "a completed backup" },
    );
    const restore = (name: string, source: Record<string, unknown>) => ({
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseRestore",
      metadata: { name, namespace: stack.namespace },
      spec: { target: { databaseRef: { name: "orders" } }, source: { databaseRef: { name: "orders" }, ...source } },
    });
    // Created while no operator runs, so the version the server stored first is still the one served: a watch alone
    // may never see it (the operator's first write can follow the create before the watch delivers it).
    await operator.stop();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        restore("rollback", { latest: true }),
        restore("bad-backup", { backupId: "bkp_doesnotexist00000000000" }),
      ),
    );
    for (const name of ["rollback", "bad-backup"]) {
      const stored = await get("mdsrestore", name);
      expect({
        name,
        kstatus: kstatusOf(stored).status,
        reconciling: condition(stored, "Reconciling")?.reason,
      }).toEqual({
        name,
        kstatus: "InProgress",
        reconciling: "AwaitingOperator",
      });
    }
    operator = await stack.startOperator();
    await expectKstatus("mdsrestore", "rollback", "Current", "restored");
    await expectKstatus("mdsrestore", "bad-backup", "Failed", "the service refused the restore");
    expect((await get("mdsrestore", "bad-backup")).status?.["phase"]).toBe("Failed");

    // Stalled on a spec the operator cannot act on; fixing the spec makes it InProgress, then Current.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(db("observer", { projectRef: { name: "shop" }, managementPolicy: "ObserveOnly" })),
    );
    await expectKstatus("mdsdb", "observer", "Failed", "ObserveOnly without externalId");
    expect(condition(await get("mdsdb", "observer"), "Stalled")?.reason).toBe("InvalidSpec");
    await stack.kubectl([
      "patch",
      "mdsdb",
      "observer",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { managementPolicy: "Full", deletionPolicy: "Delete" } }),
    ]);
    await expectKstatus("mdsdb", "observer", "Current", "spec fixed");

    // Deleting: Terminating until the finalizer goes.
    await stack.kubectl(["delete", "mdsdb", "orders", "--wait=true"]);

    // Every version the watch saw: each state had the right kstatus, and Argo CD said the same.
    recorder.stop();
    const versions = recorder.versions;
    const seen = new Set<string>();
    for (const { plural, obj } of versions) {
      const k = kstatusOf(obj);
      const ready = condition(obj, "Ready");
      const synced = condition(obj, "Synced");
      const remote = obj.status?.["remoteStatus"];
      const phase = obj.status?.["phase"];
      const rotating = (obj.status?.["rotation"] as { pending?: unknown } | undefined)?.pending !== undefined;
      const stalled = condition(obj, "Stalled")?.status === "True";
      const where = `${plural}/${obj.metadata.name} rv ${obj.metadata.resourceVersion}: ready ${ready?.status}/${ready?.reason} synced ${synced?.reason} remote ${String(remote)} phase ${String(phase)}`;
      // A spec edit the operator has not looked at yet (generation ahead of status.observedGeneration) is InProgress.
      const stale =
        obj.status?.["observedGeneration"] !== undefined &&
        obj.status["observedGeneration"] !== obj.metadata.generation;
      let expected: KStatus;
      if (obj.metadata.deletionTimestamp !== undefined) expected = "Terminating";
      else if (stale) expected = "InProgress";
      else if (stalled || phase === "Failed") expected = "Failed";
      else if (ready?.status === "True" && !rotating && (plural === "databaserestores" || remote === "ready"))
        expected = "Current";
      else expected = "InProgress";
      seen.add(`${plural}:${expected}:${condition(obj, "Reconciling")?.reason ?? "none"}`);
      expect({ where, kstatus: k.status }).toEqual({ where, kstatus: expected });
      const argo = runHealthScript(healthScript(plural === "databases" ? "Database" : "DatabaseRestore"), obj);
      expect({ where, kstatus: k.status, argo: argo.status, agree: argoAgrees(k.status, argo.status) }).toMatchObject({
        agree: true,
      });
    }
    // The walk did pass through these states (each seen at least once by the watch), named by kstatus and the
    // Reconciling reason. Only states that last until the test moves on are required here: the objects created with
    // no operator (AwaitingOperator, asserted above on the stored version), and states the test waited for.
    for (const state of [
      "databases:InProgress:AwaitingOperator",
      "databases:InProgress:ProjectNotReady",
      "databases:InProgress:CredentialsMissing",
      "databases:Current:Available",
      "databases:InProgress:Rotating",
      "databases:Failed:InvalidSpec",
      "databases:Terminating:Available",
      "databaserestores:InProgress:AwaitingOperator",
      "databaserestores:Current:Available",
      "databaserestores:Failed:RemoteFailure",
    ]) {
      expect({ state, seen: [...seen].sort() }).toMatchObject({ seen: expect.arrayContaining([state]) });
    }
  }, 180_000);
});
