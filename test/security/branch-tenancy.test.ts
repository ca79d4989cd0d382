import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// spec.branch finds or creates a branch of the Database's project by git name, and deletes a preview branch with its
// last database. Team B (namespace b, its own token) names team A's project by id (spec.projectId) and A's preview
// branch by git name, then writes A's branch id into its Database's status.branch.id and deletes the Database: A's
// branches and databases are untouched, nothing is created in A's project, and B's Database says why it cannot go on.

type Status = {
  id?: string;
  conditions?: { type: string; status: string; reason: string; message: string }[];
};

describe("team B cannot reach or delete team A's branches through spec.branch", () => {
  let stack: Stack;
  let tokenB = "";
  const ns = (team: "a" | "b") => (team === "a" ? stack.namespace : stack.namespaceOf(team));
  const asA = async <T>(path: string, init: RequestInit = {}) => {
    const res = await fetch(`${stack.service.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
    });
    expect(res.status, `${init.method ?? "GET"} ${path}`).toBeLessThan(300);
    return ((await res.json()) as { data: T }).data;
  };
  let projectA = "";
  let previewA = "";

  beforeAll(async () => {
    stack = await startStack({ api: "service", namespaces: ["b"] });
    tokenB = await stack.service.createToken("branch-team-b");
    await stack.kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: ns("b") },
        stringData: { token: tokenB },
      }),
    );
    // A's project with its production branch and an empty preview branch (its CI made it; no database yet).
    projectA = (await asA<{ id: string }>("/v1/projects", { method: "POST", body: JSON.stringify({ name: "a" }) })).id;
    const branch = (gitName: string) =>
      asA<{ id: string }>(`/v1/projects/${projectA}/branches`, {
        method: "POST",
        body: JSON.stringify({ gitName }),
      });
    await branch("main");
    previewA = (await branch("feature-a")).id;
    await stack.startOperator();
  }, 180_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  const branchesOfA = async () =>
    (await asA<{ id: string; gitName: string }[]>(`/v1/projects/${projectA}/branches`)).map((b) => b.gitName).sort();

  it("B's Database on A's project and branch creates nothing there, and its deletion deletes none of A's branches", async () => {
    const before = await branchesOfA();
    expect(before).toEqual(["feature-a", "main"]);
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "intruder", namespace: ns("b") },
        spec: {
          projectId: projectA,
          region: "us-east-1",
          branch: { gitName: "feature-a", role: "preview" },
          deletionPolicy: "Delete",
        },
      }),
    );
    // B's token sees no such project: the Database reports it and goes no further.
    const status = await eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, ns("b"), "intruder"))?.["status"] as Status;
        const synced = s?.conditions?.find((c) => c.type === "Synced" || c.type === "Ready");
        if (synced === undefined || synced.status !== "False") throw new Error(`not reported: ${JSON.stringify(s)}`);
        return s;
      },
      { what: "intruder reported", timeoutMs: 60_000 },
    );
    expect(status.id).toBeUndefined();
    // B forges A's branch id into its Database's status, then deletes the Database.
    await stack.kubectl([
      "patch",
      "database",
      "intruder",
      "-n",
      ns("b"),
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { branch: { id: previewA, gitName: "feature-a", role: "preview" } } }),
    ]);
    await stack.kubectl(["delete", "database", "intruder", "-n", ns("b"), "--wait=false"]);
    await eventually(
      async () => {
        const left = await stack.kube.get<KubeObject>(DatabaseType, ns("b"), "intruder");
        if (left !== undefined) throw new Error(`still there: ${JSON.stringify(left["status"])}`);
      },
      { what: "intruder deleted", timeoutMs: 60_000 },
    );
    expect(await branchesOfA()).toEqual(before);
    expect(await asA<unknown[]>(`/v1/databases?projectId=${projectA}&branchId=${previewA}`)).toEqual([]);
  }, 180_000);
});
