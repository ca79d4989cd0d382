import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import { ProjectType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// Status is never proof of identity, for a Project either. Team A (the operator's namespace) and team B share the
// operator's token (--credentials-fallback-namespaces "*"). B keeps a Project older than A's, paused, writes A's
// project id into its status and lets it go. Its own loop must refuse that id (it neither created the project nor
// adopts it by spec): otherwise it ranked itself as the project's creator, and, older than A's Project, managed it,
// minted a connection on A's default database into B's Secret, and under deletionPolicy Delete deleted A's project
// with its default database. Found by an adversarial reading of the identity rule; each check failed before.

type Condition = { type: string; status: string; reason: string };
type Status = { id?: string; defaultDatabase?: { id?: string }; conditions?: Condition[] };

describe.each(counterparts)("a Project whose status.id is forged acts on nothing of another's, against %s", (api) => {
  let stack: Stack;
  let token = "";
  let projectA = "";
  let dbA = "";
  const nsA = () => stack.namespace;
  const nsB = () => stack.namespaceOf("b");

  const statusOf = async (namespace: string, name: string) =>
    (await stack.kube.get<KubeObject>(ProjectType, namespace, name))?.["status"] as Status | undefined;
  const until = <T>(what: string, read: () => Promise<T | undefined>) =>
    eventually(
      async () => {
        const value = await read();
        if (value === undefined) throw new Error(`not yet: ${what}`);
        return value;
      },
      { what, timeoutMs: 60_000 },
    );
  const service = async (path: string) => {
    const res = await fetch(`${stack.service.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as { data: unknown } };
  };
  const connectionsOfA = async () =>
    ((await service(`/v1/databases/${dbA}`)).body.data as { connections: { id: string }[] }).connections
      .map((c) => c.id)
      .sort();
  const secretInB = async () =>
    stack.kubectl(["get", "secret", "early-db", "-n", nsB(), "-o", "name"]).then(
      () => true,
      () => false,
    );

  beforeAll(async () => {
    stack = await startStack({ api, namespaces: ["b"] });
    token = stack.service.token;
    const operatorCredentials = { secretNamespace: stack.namespace, secretName: "mds-credentials", key: "token" };
    await stack.startOperator({ defaultCredentials: { ...operatorCredentials, fallbackNamespaces: "*" } });
    // B's Project first (so older than A's), paused: it creates nothing of its own.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Project",
        metadata: { name: "early", namespace: nsB(), annotations: { "mds.dev/paused": "true" } },
        spec: { region: "us-east-1", connectionSecret: { name: "early-db" }, deletionPolicy: "Delete" },
      }),
    );
    await until("B's Project paused", async () =>
      (await statusOf(nsB(), "early"))?.conditions?.some((c) => c.reason === "ReconcilePaused") ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, 1100)); // creationTimestamp has a resolution of one second
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Project",
        metadata: { name: "app", namespace: nsA() },
        spec: { region: "us-east-1", connectionSecret: { name: "app-db" } },
      }),
    );
    const a = await until("A's Project Ready", async () => {
      const s = await statusOf(nsA(), "app");
      return s?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true ? s : undefined;
    });
    projectA = a.id!;
    dbA = a.defaultDatabase!.id!;
    await stack.kubectl([
      "patch",
      "project",
      "early",
      "-n",
      nsB(),
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { id: projectA } }),
    ]);
    await stack.kubectl(["annotate", "project", "early", "-n", nsB(), "mds.dev/paused-"]);
  }, 180_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("is refused by its own loop: no Secret in B, no connection on A's default database, A's Project unharmed", async () => {
    const before = await connectionsOfA();
    const refused = await until("B's forged Project refused", async () => {
      const s = await statusOf(nsB(), "early");
      return s?.conditions?.find((c) => c.type === "Stalled" && c.status === "True");
    });
    expect(refused.reason).toBe("AdoptionRefused");
    expect(await secretInB()).toBe(false);
    expect(await connectionsOfA()).toEqual(before);
    const a = await statusOf(nsA(), "app");
    expect(a?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    expect(a?.conditions?.some((c) => c.type === "Stalled" && c.status === "True")).toBe(false);
  });

  it("deleted under deletionPolicy Delete, deletes nothing of A's", async () => {
    await stack.kubectl(["delete", "project", "early", "-n", nsB(), "--timeout=60s"]);
    expect(await stack.kube.get(ProjectType, nsB(), "early")).toBeUndefined();
    expect((await service(`/v1/projects/${projectA}`)).status).toBe(200);
    expect((await service(`/v1/databases/${dbA}`)).status).toBe(200);
  });
});
