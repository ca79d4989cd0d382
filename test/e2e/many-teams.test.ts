import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { credentialsFinalizer } from "../../src/operator/credentials-guard.ts";
import { ConnectionType, DatabaseRestoreType, DatabaseType, ProjectType } from "../../src/resources/types.ts";
import type { ResourceType } from "../../src/kube/types.ts";
import { formatFindings, scanText } from "../support/secret-scan.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// One operator, two teams: each namespace holds its own workspace's token as `mds-credentials`, the operator's own
// token serves only its namespace. Neither team can read, adopt, mint for, restore or delete the other's objects,
// by name or by id; a namespace with no token gets nothing. Deleting a team's namespace deletes its Delete-policy
// databases with its own token (the credentials Secret waits for them), then the namespace goes.

type Cond = { type: string; status: string; reason: string; message: string };
type Status = {
  id?: string;
  credentials?: { secret: string; source: string };
  conditions?: Cond[];
  phase?: string;
  message?: string;
};

describe.each(counterparts)("many teams against %s", (api) => {
  let stack: Stack;
  const tokens = { a: "", b: "" };
  // The teams' namespaces come from the stack (created, watched, cleaned up): on a real cluster their names are
  // unique to this run, so files running in parallel there never meet.
  const ns = (team: "a" | "b" | "c") => stack.namespaceOf(`team-${team}`);

  beforeAll(async () => {
    stack = await startStack({ api, namespaces: ["team-a", "team-b", "team-c"] });
    tokens.a = await stack.service.createToken(`team-a-${api}`);
    tokens.b = await stack.service.createToken(`team-b-${api}`);
    for (const team of ["a", "b"] as const) {
      const secret = {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: ns(team) },
        stringData: { token: tokens[team] },
      };
      await stack.kubectl(["create", "-f", "-"], JSON.stringify(secret));
    }
    // The e2e operator's own token lives in the stack's namespace; with the default setting only that namespace may use it.
    await stack.startOperator();
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const get = async (type: ResourceType, namespace: string, name: string) =>
    (await stack.kube.get<KubeObject>(type, namespace, name))?.["status"] as Status | undefined;
  const cond = async (type: ResourceType, namespace: string, name: string, c: string) =>
    (await get(type, namespace, name))?.conditions?.find((x) => x.type === c);
  const waitCond = (type: ResourceType, namespace: string, name: string, c: string, want: Partial<Cond>) =>
    eventually(
      async () => {
        const got = await cond(type, namespace, name, c);
        for (const [k, v] of Object.entries(want))
          if (got?.[k as keyof Cond] !== v) throw new Error(`${namespace}/${name} ${c}: ${JSON.stringify(got)}`);
        return got!;
      },
      { what: `${namespace}/${name} ${c} ${JSON.stringify(want)}`, timeoutMs: 60_000 },
    );
  const apiGet = async (token: string, path: string) => {
    const res = await fetch(`${stack.service.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return {
      status: res.status,
      body: (await res.json()) as { data?: { name?: string; connections?: { id: string; name: string }[] } },
    };
  };
  const apply = (...objs: object[]) => stack.kubectl(["apply", "-f", "-"], manifests(...objs));
  const project = (namespace: string, name: string, spec: object = {}) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name, namespace },
    spec: { region: "us-east-1", ...spec },
  });
  const database = (namespace: string, name: string, spec: object) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace },
    spec,
  });

  it("keeps two teams apart: by name and by id, nothing of one is read, adopted, minted for, restored or deleted by the other", async () => {
    // Team A: a project and a database, with its namespace's own token.
    await apply(
      project(ns("a"), "app"),
      database(ns("a"), "orders", {
        projectRef: { name: "app" },
        deletionPolicy: "Delete",
        connectionSecret: { name: "orders-db" },
      }),
    );
    await waitCond(DatabaseType, ns("a"), "orders", "Ready", { status: "True" });
    const orders = (await get(DatabaseType, ns("a"), "orders"))!;
    const appId = (await get(ProjectType, ns("a"), "app"))!.id!;
    const ordersId = orders.id!;
    expect(orders.credentials).toEqual({ secret: `${ns("a")}/mds-credentials`, key: "token", source: "namespace" });
    expect((await apiGet(tokens.a, `/v1/databases/${ordersId}`)).status).toBe(200);
    expect((await apiGet(tokens.b, `/v1/databases/${ordersId}`)).status).toBe(404);
    expect((await apiGet(stack.service.token, `/v1/databases/${ordersId}`)).status).toBe(404);
    const connectionsBefore = (await apiGet(tokens.a, `/v1/databases/${ordersId}`)).body
      .data!.connections!.map((c) => c.id)
      .sort();
    // The team's Secret is kept while the database needs it to be deleted.
    expect((await stack.kube.get<Secret>(SecretType, ns("a"), "mds-credentials"))!.metadata.finalizers).toContain(
      credentialsFinalizer,
    );

    // A namespace without a token of its own gets nothing: the operator's token is not lent to it.
    await apply(project(ns("c"), "free-ride"));
    const missing = await waitCond(ProjectType, ns("c"), "free-ride", "Synced", {
      status: "False",
      reason: "CredentialsMissing",
    });
    expect(missing.message).toContain(`create Secret "${ns("c")}/mds-credentials"`);
    expect((await get(ProjectType, ns("c"), "free-ride"))?.id).toBeUndefined();

    // Team B, with its own workspace, tries everything against team A's objects.
    await apply(project(ns("b"), "mine"));
    await waitCond(ProjectType, ns("b"), "mine", "Ready", { status: "True" });
    const restoreTarget = database(ns("b"), "target", { projectRef: { name: "mine" }, deletionPolicy: "Delete" });
    await apply(
      restoreTarget,
      // adopt A's database by id (and delete it with Delete policy)
      database(ns("b"), "stolen", {
        projectRef: { name: "mine" },
        externalId: ordersId,
        deletionPolicy: "Delete",
        connectionSecret: { name: "stolen-db" },
      }),
      // adopt A's project by id
      project(ns("b"), "stolen-project", { externalId: appId, deletionPolicy: "Delete" }),
      // mint for A's database by id, with B's own token
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Connection",
        metadata: { name: "by-id", namespace: ns("b") },
        spec: { databaseId: ordersId, credentials: { secretRef: { name: "mds-credentials" } } },
      },
      // mint for A's database by name, across namespaces
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Connection",
        metadata: { name: "by-name", namespace: ns("b") },
        spec: { databaseRef: { name: "orders", namespace: ns("a") } },
      },
    );
    await waitCond(DatabaseType, ns("b"), "target", "Ready", { status: "True" });
    const stalled = await waitCond(DatabaseType, ns("b"), "stolen", "Stalled", {
      status: "True",
      reason: "AdoptionRefused",
    });
    expect(stalled.message).toContain(`${ns("b")}/mds-credentials`);
    await waitCond(ProjectType, ns("b"), "stolen-project", "Stalled", { status: "True", reason: "AdoptionRefused" });
    await waitCond(ConnectionType, ns("b"), "by-name", "Synced", { status: "False", reason: "ReferenceNotAllowed" });
    await waitCond(ConnectionType, ns("b"), "by-id", "Synced", { status: "False", reason: "DatabaseNotReady" });
    // Restore A's backups into B's database, by id with B's token; and into the refused adoption by name.
    await apply(
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "DatabaseRestore",
        metadata: { name: "from-a", namespace: ns("b") },
        spec: {
          target: { databaseRef: { name: "target" } },
          source: { databaseId: ordersId, latest: true },
          credentials: { secretRef: { name: "mds-credentials" } },
        },
      },
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "DatabaseRestore",
        metadata: { name: "into-a", namespace: ns("b") },
        spec: {
          target: { databaseRef: { name: "stolen" } },
          source: { databaseRef: { name: "target" }, latest: true },
        },
      },
    );
    await waitCond(DatabaseRestoreType, ns("b"), "from-a", "Synced", { status: "False" });
    await waitCond(DatabaseRestoreType, ns("b"), "into-a", "Synced", { status: "False", reason: "DatabaseNotReady" });
    expect((await get(DatabaseRestoreType, ns("b"), "from-a"))?.phase).not.toBe("Running");

    // Nothing of B's reached A: no Secret of A's database in B's namespace, no new login, A's names unchanged.
    expect(await stack.kube.get<Secret>(SecretType, ns("b"), "stolen-db")).toBeUndefined();
    expect(await stack.kube.get<Secret>(SecretType, ns("b"), "by-id")).toBeUndefined();
    expect(await stack.kube.get<Secret>(SecretType, ns("b"), "by-name")).toBeUndefined();
    const after = await apiGet(tokens.a, `/v1/databases/${ordersId}`);
    expect(after.body.data!.connections!.map((c) => c.id).sort()).toEqual(connectionsBefore);
    expect(after.body.data!.name).toBe("orders");
    for (const o of ["stolen", "target"]) expect((await get(DatabaseType, ns("b"), o))?.id).not.toBe(ordersId);

    // B deletes what it applied (Delete policy): A's database and project stay.
    await stack.kubectl([
      "delete",
      "-n",
      ns("b"),
      "databases.mds.dev/stolen",
      "projects.mds.dev/stolen-project",
      "connections.mds.dev/by-id",
      "connections.mds.dev/by-name",
      "--wait=true",
      "--timeout=60s",
    ]);
    expect((await apiGet(tokens.a, `/v1/databases/${ordersId}`)).status).toBe(200);
    expect((await apiGet(tokens.a, `/v1/projects/${appId}`)).status).toBe(200);

    // Deleting team A's Secret, then its namespace, deletes its Delete-policy database with A's token: the Secret
    // stays (Terminating, readable) until no resource needs it.
    await stack.kubectl(["delete", "secret", "mds-credentials", "-n", ns("a"), "--wait=false"]);
    expect(
      (await stack.kube.get<Secret>(SecretType, ns("a"), "mds-credentials"))?.metadata.deletionTimestamp,
    ).toBeDefined();
    await stack.kubectl(["delete", "namespace", ns("a"), "--wait=false"]);
    await eventually(async () => expect((await apiGet(tokens.a, `/v1/databases/${ordersId}`)).status).toBe(404), {
      what: "A's database deleted",
      timeoutMs: 90_000,
    });
    await eventually(
      async () => {
        const out = await stack.kubectl(["get", "namespace", ns("a"), "--ignore-not-found", "-o", "name"]);
        expect(out.trim()).toBe("");
      },
      { what: `namespace ${ns("a")} gone`, timeoutMs: 90_000 },
    );

    // No token of either team in any log line, Event, status or label.
    const everything = [
      stack.logs.join(""),
      await stack.kubectl([
        "get",
        "events,projects.mds.dev,databases.mds.dev,connections.mds.dev,databaserestores.mds.dev",
        "-A",
        "-o",
        "json",
      ]),
    ].join("\n");
    const planted = [
      { name: "team A token", value: tokens.a },
      { name: "team B token", value: tokens.b },
    ];
    expect(formatFindings(scanText(everything, planted, "operator logs and resources"))).toBe("");
  }, 240_000);
});
