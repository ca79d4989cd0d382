import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type ResourceType, type Secret } from "../../src/kube/types.ts";
import { DatabaseType, ProjectType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// Attacks through adoption: one remote object, one managing resource per operator.
// - A second Database (same namespace, or another namespace with the same token) that adopts the externalId a
//   protected Database already manages is Stalled (AdoptionConflict, naming the first); it renames nothing, mints
//   nothing, and deleting it with deletionPolicy Delete deletes nothing remote. Same for Projects.
// - Deleting a Project (Delete) whose default database a protected Database adopted is blocked (DeletionBlocked,
//   naming that Database) until the protection is lifted; the project and its default database stay.
// Runs against our service and the public-API emulator: the project's deletion takes another path there.

type Cond = { type: string; status: string; reason: string; message: string };
type Status = { id?: string; defaultDatabase?: { id: string }; conditions?: Cond[] };
type RemoteDatabase = { id: string; name: string; status: string; connections: { id: string }[] };

describe.each(counterparts)("adoption is exclusive against %s", (counterpart) => {
  let stack: Stack;
  let otherNs = "";
  let squatterNs = "";

  beforeAll(async () => {
    // Namespaces from the harness: their own names on devkube, unique ones on a real cluster (MDS_E2E_KUBECONFIG).
    stack = await startStack({
      api: counterpart,
      namespaces: [`adopt-other-${counterpart}`, `adopt-squatter-${counterpart}`],
    });
    otherNs = stack.namespaceOf(`adopt-other-${counterpart}`);
    squatterNs = stack.namespaceOf(`adopt-squatter-${counterpart}`);
    // Another namespace holding the same token: cross-namespace adoption is allowed, so exclusivity must hold there too.
    await stack.kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: otherNs },
        stringData: { token: stack.service.token },
      }),
    );
    // A namespace with a token of another workspace: it sees none of the objects the tests adopt.
    const token = await stack.service.createToken(`squatter-${counterpart}`);
    await stack.kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: squatterNs },
        stringData: { token },
      }),
    );
    await stack.startOperator();
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const api = async <T>(method: string, path: string, body?: object): Promise<{ status: number; data: T }> => {
    const res = await fetch(`${stack.service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, data: ((await res.json()) as { data: T }).data };
  };
  const status = async (type: ResourceType, ns: string, name: string) =>
    (await stack.kube.get<KubeObject>(type, ns, name))?.["status"] as Status | undefined;
  const cond = async (type: ResourceType, ns: string, name: string, c: string) =>
    (await status(type, ns, name))?.conditions?.find((x) => x.type === c);
  const waitCond = (type: ResourceType, ns: string, name: string, c: string, want: Partial<Cond>) =>
    eventually(
      async () => {
        const got = await cond(type, ns, name, c);
        for (const [k, v] of Object.entries(want))
          if (got?.[k as keyof Cond] !== v) throw new Error(`${ns}/${name} ${c}: ${JSON.stringify(got)}`);
        return got!;
      },
      { what: `${ns}/${name} ${c} ${JSON.stringify(want)}`, timeoutMs: 30_000 },
    );
  /** Ready=True or Stalled=True: the operator made up its mind about the resource. */
  const settled = (type: ResourceType, ns: string, name: string) =>
    eventually(
      async () => {
        const [ready, stalled] = [await cond(type, ns, name, "Ready"), await cond(type, ns, name, "Stalled")];
        if (ready?.status !== "True" && stalled?.status !== "True")
          throw new Error(`${ns}/${name}: ${JSON.stringify({ ready, stalled })}`);
        return stalled;
      },
      { what: `${ns}/${name} settled`, timeoutMs: 30_000 },
    );
  const apply = (...objs: object[]) => stack.kubectl(["apply", "-f", "-"], manifests(...objs));
  const resource = (kind: "Database" | "Project", ns: string, name: string, spec: object) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind,
    metadata: { name, namespace: ns },
    spec,
  });
  const remoteDb = (id: string) => api<RemoteDatabase>("GET", `/v1/databases/${id}`);
  const connectionsOf = async (id: string) => (await remoteDb(id)).data.connections.map((c) => c.id).sort();

  it("a second Database adopting a managed database is Stalled naming the first, acts on nothing remote, and its deletion drops nothing; the first one's release hands the database over", async () => {
    const ns = stack.namespace;
    const project = (
      await api<{ id: string }>("POST", "/v1/projects", {
        name: `adopt-${counterpart}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    // The first Database creates it (status.id recorded at once); the others name it by id.
    await apply(
      resource("Database", ns, "first", {
        projectId: project.id,
        displayName: "orders",
        deletionProtection: true,
        connectionSecret: { name: "first-db" },
      }),
    );
    await waitCond(DatabaseType, ns, "first", "Ready", { status: "True" });
    const orders = { id: (await status(DatabaseType, ns, "first"))!.id! };
    const loginsBefore = await connectionsOf(orders.id);

    // The attack: same externalId, deletionPolicy Delete, and a rename, from this namespace and from another one.
    const claim = { projectId: project.id, externalId: orders.id, deletionPolicy: "Delete", displayName: "hijacked" };
    await apply(
      resource("Database", ns, "second", { ...claim, connectionSecret: { name: "second-db" } }),
      resource("Database", otherNs, "third", { ...claim, connectionSecret: { name: "third-db" } }),
      resource("Database", ns, "standby", {
        projectId: project.id,
        externalId: orders.id,
        connectionSecret: { name: "standby-db" },
      }),
    );
    const verdicts = {
      second: await settled(DatabaseType, ns, "second"),
      third: await settled(DatabaseType, otherNs, "third"),
      standby: await settled(DatabaseType, ns, "standby"),
    };

    // Deleting the second claimants must not drop the database the first one protects.
    await stack.kubectl(["delete", "databases.mds.dev/second", "--wait=true", "--timeout=30s"]);
    await stack.kubectl(["delete", "databases.mds.dev/third", "-n", otherNs, "--wait=true", "--timeout=30s"]);
    expect((await remoteDb(orders.id)).status, "the database the first Database protects was dropped").toBe(200);

    for (const [name, stalled] of Object.entries(verdicts)) {
      expect([name, stalled?.status, stalled?.reason]).toEqual([name, "True", "AdoptionConflict"]);
      expect(stalled?.message).toContain(`Database "${ns}/first"`);
      expect(stalled?.message).toContain(orders.id);
    }
    // Nothing acted on: no rename, no login minted, no Secret, no status.id.
    const after = (await remoteDb(orders.id)).data;
    expect(after.name).toBe("orders");
    expect(await connectionsOf(orders.id)).toEqual(loginsBefore);
    expect(await stack.kube.get<Secret>(SecretType, ns, "standby-db")).toBeUndefined();
    expect((await status(DatabaseType, ns, "standby"))?.id).toBeUndefined();
    await waitCond(DatabaseType, ns, "first", "Ready", { status: "True" });

    // Handing over: the first one released (Retain), the standby claimant takes the database on.
    await stack.kubectl([
      "patch",
      "databases.mds.dev/first",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { deletionProtection: false } }),
    ]);
    await stack.kubectl(["delete", "databases.mds.dev/first", "--wait=true", "--timeout=30s"]);
    await waitCond(DatabaseType, ns, "standby", "Ready", { status: "True" });
    await waitCond(DatabaseType, ns, "standby", "Stalled", { status: "False" });
    expect((await status(DatabaseType, ns, "standby"))?.id).toBe(orders.id);
    expect(await stack.kube.get<Secret>(SecretType, ns, "standby-db")).toBeDefined();
    expect(await stack.leaks()).toBe("");
  }, 180_000);

  it("a database adopted by one Database and handed over to another (the first deleted with Retain) gets the second its own login and Secret", async () => {
    const ns = stack.namespace;
    const project = (
      await api<{ id: string }>("POST", "/v1/projects", {
        name: `handover-${counterpart}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    const target = (
      await api<RemoteDatabase>("POST", "/v1/databases", { projectId: project.id, name: "handed", region: "us-east-1" })
    ).data;
    await eventually(async () => expect((await remoteDb(target.id)).data.status).toBe("ready"), {
      what: "handed ready",
    });
    // Both adopt by externalId, so both mint from the same database with no previous connection: before the mint's
    // idempotency key carried the connection's name, the second mint reused the first one's key with another body
    // (422 from our service) and the standby stayed SecretOutOfDate.
    await apply(
      resource("Database", ns, "adopter", {
        projectId: project.id,
        externalId: target.id,
        connectionSecret: { name: "adopter-db" },
      }),
    );
    await waitCond(DatabaseType, ns, "adopter", "Ready", { status: "True" });
    await apply(
      resource("Database", ns, "successor", {
        projectId: project.id,
        externalId: target.id,
        connectionSecret: { name: "successor-db" },
      }),
    );
    await waitCond(DatabaseType, ns, "successor", "Stalled", { status: "True", reason: "AdoptionConflict" });
    await stack.kubectl(["delete", "databases.mds.dev/adopter", "--wait=true", "--timeout=30s"]);
    await waitCond(DatabaseType, ns, "successor", "Ready", { status: "True" });
    const secret = await stack.kube.get<Secret>(SecretType, ns, "successor-db");
    expect(secret?.data?.["DATABASE_URL"]).toBeDefined();
    expect(await stack.leaks()).toBe("");
  }, 120_000);

  it("a namespace whose token cannot see a database cannot block its adoption by naming its id first, and learns no name", async () => {
    const ns = stack.namespace;
    const project = (
      await api<{ id: string }>("POST", "/v1/projects", {
        name: `claimed-${counterpart}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    const target = (
      await api<RemoteDatabase>("POST", "/v1/databases", { projectId: project.id, name: "target", region: "us-east-1" })
    ).data;
    await eventually(async () => expect((await remoteDb(target.id)).data.status).toBe("ready"), {
      what: "target ready",
    });

    await apply(
      resource("Database", squatterNs, "squatter", {
        projectId: project.id,
        externalId: target.id,
        deletionPolicy: "Delete",
      }),
    );
    await waitCond(DatabaseType, squatterNs, "squatter", "Stalled", { status: "True", reason: "AdoptionRefused" });
    await apply(
      resource("Database", ns, "rightful", {
        projectId: project.id,
        externalId: target.id,
        connectionSecret: { name: "rightful-db" },
      }),
    );
    await waitCond(DatabaseType, ns, "rightful", "Ready", { status: "True" });
    expect((await status(DatabaseType, ns, "rightful"))?.id).toBe(target.id);
    // Its next look (a reconcile request) still refuses it for what its token sees, without naming the manager.
    await stack.kubectl([
      "annotate",
      "databases.mds.dev/squatter",
      "-n",
      squatterNs,
      "mds.dev/reconcile-requested-at=again",
    ]);
    await eventually(async () =>
      expect(
        (await stack.kube.get<KubeObject>(DatabaseType, squatterNs, "squatter"))?.metadata.annotations?.[
          "mds.dev/reconcile-requested-at"
        ],
      ).toBe("again"),
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const refused = await waitCond(DatabaseType, squatterNs, "squatter", "Stalled", {
      status: "True",
      reason: "AdoptionRefused",
    });
    expect(refused.message).not.toContain("rightful");
    await stack.kubectl(["delete", "databases.mds.dev/squatter", "-n", squatterNs, "--wait=true", "--timeout=30s"]);
    expect((await remoteDb(target.id)).status).toBe(200);
  }, 120_000);

  it("a second Project adopting a managed project is Stalled naming the first, and its deletion drops nothing", async () => {
    const ns = stack.namespace;
    const shared = (
      await api<{ id: string }>("POST", "/v1/projects", {
        name: `shared-${counterpart}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    await apply(resource("Project", ns, "p-first", { externalId: shared.id, deletionProtection: true }));
    await waitCond(ProjectType, ns, "p-first", "Ready", { status: "True" });
    await apply(resource("Project", otherNs, "p-second", { externalId: shared.id, deletionPolicy: "Delete" }));
    const verdict = await settled(ProjectType, otherNs, "p-second");
    await stack.kubectl(["delete", "projects.mds.dev/p-second", "-n", otherNs, "--wait=true", "--timeout=30s"]);
    expect(
      (await api("GET", `/v1/projects/${shared.id}`)).status,
      "the project the first Project protects was deleted",
    ).toBe(200);
    expect([verdict?.status, verdict?.reason]).toEqual(["True", "AdoptionConflict"]);
    expect(verdict?.message).toContain(`Project "${ns}/p-first"`);
  }, 120_000);

  it("deleting a Project is blocked while a protected Database manages its default database", async () => {
    const ns = stack.namespace;
    await apply(
      resource("Project", ns, "shop", {
        region: "us-east-1",
        deletionPolicy: "Delete",
        connectionSecret: { name: "shop-db" },
      }),
    );
    await waitCond(ProjectType, ns, "shop", "Ready", { status: "True" });
    const { id: projectId, defaultDatabase } = (await status(ProjectType, ns, "shop"))!;
    const defaultId = defaultDatabase!.id;
    await apply(
      resource("Database", ns, "shop-main", {
        projectRef: { name: "shop" },
        externalId: defaultId,
        deletionProtection: true,
        connectionSecret: { name: "shop-main-db" },
      }),
    );
    await waitCond(DatabaseType, ns, "shop-main", "Ready", { status: "True" });

    await stack.kubectl(["delete", "projects.mds.dev/shop", "--wait=false"]);
    // Give a deletion that is not blocked the time to happen, then look.
    const blocked = await eventually(
      async () => {
        expect((await api("GET", `/v1/projects/${projectId!}`)).status, "the project was deleted").toBe(200);
        expect((await remoteDb(defaultId)).status, "the protected default database was dropped").toBe(200);
        const ready = await cond(ProjectType, ns, "shop", "Ready");
        expect([ready?.status, ready?.reason]).toEqual(["False", "DeletionBlocked"]);
        return ready!;
      },
      { what: "shop's deletion blocked", timeoutMs: 30_000 },
    );
    expect(blocked.message).toContain(`Database "${ns}/shop-main"`);
    expect(blocked.message).toContain(defaultId);
    await new Promise((r) => setTimeout(r, 2_000));
    expect((await api("GET", `/v1/projects/${projectId!}`)).status).toBe(200);
    expect((await remoteDb(defaultId)).status).toBe(200);
    expect(await stack.kube.get(ProjectType, ns, "shop")).toBeDefined();

    // Lifting the protection lets the deletion finish.
    await stack.kubectl([
      "patch",
      "databases.mds.dev/shop-main",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { deletionProtection: false } }),
    ]);
    await eventually(async () => expect(await stack.kube.get(ProjectType, ns, "shop")).toBeUndefined(), {
      what: "shop deleted",
      timeoutMs: 30_000,
    });
    expect((await api("GET", `/v1/projects/${projectId!}`)).status).toBe(404);
    await stack.kubectl(["delete", "databases.mds.dev/shop-main", "--wait=true", "--timeout=30s"]);
  }, 120_000);
  // Status is not a proof of ownership: status is anyone's to write who may write the status subresource. Team B learns a
  // database id of team A (a granted Connection's status.databaseId, a Secret's label) and writes it in the status
  // of a Database of its own, with a token that cannot see that database. Its claim must count for nothing.
  const forged = async (name: string, spec: object, id: string) => {
    await apply({
      ...resource("Database", squatterNs, name, spec),
      metadata: { name, namespace: squatterNs, annotations: { "mds.dev/paused": "true" } },
    });
    await stack.kubectl([
      "patch",
      "databases.mds.dev",
      name,
      "-n",
      squatterNs,
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status: { id } }),
    ]);
    await eventually(async () => expect((await status(DatabaseType, squatterNs, name))?.id).toBe(id), {
      what: `${name}'s forged status.id`,
    });
  };

  it("an older Database of another workspace's namespace with the id written in its status does not take over a database's adoption", async () => {
    const ns = stack.namespace;
    const project = (
      await api<{ id: string }>("POST", "/v1/projects", {
        name: `forged-${counterpart}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    const target = (
      await api<RemoteDatabase>("POST", "/v1/databases", {
        projectId: project.id,
        name: "coveted",
        region: "us-east-1",
      })
    ).data;
    await eventually(async () => expect((await remoteDb(target.id)).data.status).toBe("ready"), {
      what: "coveted ready",
    });
    // Older than the rightful claimant, "recorded" by hand, paused so that nothing the operator writes undoes it.
    await forged("usurper", { projectId: project.id, externalId: target.id, deletionPolicy: "Delete" }, target.id);
    await new Promise((r) => setTimeout(r, 1_100)); // creationTimestamp has a resolution of one second
    await apply(
      resource("Database", ns, "owner", {
        projectId: project.id,
        externalId: target.id,
        connectionSecret: { name: "owner-db" },
      }),
    );
    const verdict = await settled(DatabaseType, ns, "owner");
    expect([verdict?.status, verdict?.reason, verdict?.message]).not.toContain("AdoptionConflict");
    await waitCond(DatabaseType, ns, "owner", "Ready", { status: "True" });
    expect((await status(DatabaseType, ns, "owner"))?.id).toBe(target.id);
    await stack.kubectl(["delete", "databases.mds.dev/usurper", "-n", squatterNs, "--wait=true", "--timeout=30s"]);
    await stack.kubectl(["delete", "databases.mds.dev/owner", "--wait=true", "--timeout=30s"]);
  }, 120_000);

  it("a protected Database of another workspace's namespace with a project's default database id written in its status does not block that project's deletion", async () => {
    const ns = stack.namespace;
    await apply(
      resource("Project", ns, "till", {
        region: "us-east-1",
        deletionPolicy: "Delete",
        connectionSecret: { name: "till-db" },
      }),
    );
    await waitCond(ProjectType, ns, "till", "Ready", { status: "True" });
    const { id: projectId, defaultDatabase } = (await status(ProjectType, ns, "till"))!;
    await forged("blocker", { projectId: projectId!, deletionProtection: true }, defaultDatabase!.id);

    await stack.kubectl(["delete", "projects.mds.dev/till", "--wait=false"]);
    await eventually(
      async () => {
        const ready = await cond(ProjectType, ns, "till", "Ready");
        expect(ready?.reason, JSON.stringify(ready)).not.toBe("DeletionBlocked");
        expect(await stack.kube.get(ProjectType, ns, "till")).toBeUndefined();
      },
      { what: "till deleted", timeoutMs: 30_000 },
    );
    expect((await api("GET", `/v1/projects/${projectId!}`)).status).toBe(404);
    await stack.kubectl(["delete", "databases.mds.dev/blocker", "-n", squatterNs, "--wait=true", "--timeout=30s"]);
  }, 120_000);
});
