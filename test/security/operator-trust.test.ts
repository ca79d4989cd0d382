import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { annotations, decodeData, encodeData, labels, managedByValue } from "../../src/operator/secret/render.ts";
import { credentialsHash } from "../../src/operator/secret/connection-credentials.ts";
import { ConnectionType, DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { startFaultProxy, type FaultProxy } from "../support/fault-proxy.ts";
import { counterparts, eventually, itNeedsDevkube, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// A team attacks the operator through what it may write: team B holds a Connection that team A's Database `orders` grants it. Everything B can write
// (its Connection's spec and status, its Secret's labels and annotations, a Secret of its own making) must never make
// the operator revoke, with A's token, a login that is not B's Connection's own: neither a login of A's other
// database `billing` nor the Database `orders`' own login. B learns such ids from pg_roles; here the test reads them
// from A's status.
// The same through status: a DatabaseRestore's status (its target, source and backup) and a deleting
// Connection's status.credentials are B's to write too; they must not choose what the operator acts on, nor which
// Secret's value it sends as a token. The operator talks to the service through a counting proxy, which tells
// (by a hash of the Authorization header) which tokens it sent.

type Status = {
  id?: string;
  connection?: { id: string; name: string };
  rotation?: { lastRotationTime?: string; retiring?: { id: string } };
  conditions?: { type: string; status: string; reason: string; message: string }[];
};

describe.each(counterparts)("the operator acts only on what it minted, against %s", (api) => {
  let stack: Stack;
  let proxy: FaultProxy;
  let tokenA = "";
  const ns = (team: "a" | "b") => `trust-${team}-${api}`;

  beforeAll(async () => {
    stack = await startStack({ api });
    tokenA = await stack.service.createToken(`trust-a-${api}`);
    for (const team of ["a", "b"] as const) await stack.kubectl(["create", "namespace", ns(team)]);
    const secret = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "mds-credentials", namespace: ns("a") },
      stringData: { token: tokenA },
    };
    await stack.kubectl(["create", "-f", "-"], JSON.stringify(secret));
    proxy = await startFaultProxy({ target: stack.emulator?.url ?? stack.service.url });
    await stack.startOperator({ apiUrl: proxy.url });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await proxy?.stop();
  });

  const statusOf = async (type: typeof ConnectionType, namespace: string, name: string) =>
    (await stack.kube.get<KubeObject>(type, namespace, name))?.["status"] as Status | undefined;
  const ready = (type: typeof ConnectionType, namespace: string, name: string) =>
    eventually(
      async () => {
        const s = await statusOf(type, namespace, name);
        const r = s?.conditions?.find((c) => c.type === "Ready");
        if (r?.status !== "True") throw new Error(`${namespace}/${name} not Ready: ${JSON.stringify(r)}`);
        return s!;
      },
      { what: `${namespace}/${name} Ready`, timeoutMs: 60_000 },
    );
  /** The ids of a database's connections, as team A sees them at the service. */
  const connectionsOf = async (databaseId: string) => {
    const res = await fetch(`${stack.service.url}/v1/databases/${databaseId}`, {
      headers: { authorization: `Bearer ${tokenA}` },
    });
    return ((await res.json()) as { data: { connections: { id: string }[] } }).data.connections.map((c) => c.id);
  };
  const secretOf = (name: string) => stack.kube.get<Secret>(SecretType, ns("b"), name);
  const warnings = async () =>
    (
      JSON.parse(await stack.kubectl(["get", "events", "-n", ns("b"), "-o", "json"])) as {
        items: { reason: string; message: string }[];
      }
    ).items;
  const connection = (name: string, extra: object = {}) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Connection",
    metadata: { name, namespace: ns("b") },
    spec: {
      databaseRef: { name: "orders", namespace: ns("a") },
      connectionSecret: { name: `${name}-db`, rotation: { gracePeriod: "1s" }, ...extra },
    },
  });

  itNeedsDevkube(
    "no label, annotation, status or Secret team B writes makes the operator revoke a login of team A's",
    "two namespaces the operator watches",
    async () => {
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests(
          {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Project",
            metadata: { name: "app", namespace: ns("a") },
            spec: { region: "us-east-1" },
          },
          {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Database",
            metadata: { name: "orders", namespace: ns("a") },
            spec: {
              projectRef: { name: "app" },
              connectionSecret: { name: "orders-db" },
              connectionPolicy: { allowedNamespaces: [ns("b")] },
            },
          },
          {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Database",
            metadata: { name: "billing", namespace: ns("a") },
            spec: { projectRef: { name: "app" }, connectionSecret: { name: "billing-db" } },
          },
          connection("reader"),
          connection("forger"),
          connection("rotator"),
          connection("status-writer"),
        ),
      );
      const orders = await ready(DatabaseType, ns("a"), "orders");
      const billing = await ready(DatabaseType, ns("a"), "billing");
      for (const c of ["reader", "forger", "rotator", "status-writer"]) await ready(ConnectionType, ns("b"), c);
      // Each attack aims at fresh victims, so that each one is judged on its own: a login A minted for another app
      // on `orders`, and one on `billing`. A's Databases' own logins are checked at the end.
      const mintAs = async (databaseId: string, name: string) => {
        const res = await fetch(`${stack.service.url}/v1/databases/${databaseId}/connections`, {
          method: "POST",
          headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
          body: JSON.stringify({ name }),
        });
        expect(res.status).toBe(201);
        return ((await res.json()) as { data: { id: string } }).data.id;
      };
      let victims = { ordersLogin: "", billingLogin: "" };
      const newVictims = async (attack: string) => {
        victims = {
          ordersLogin: await mintAs(orders.id!, `app-${attack}`),
          billingLogin: await mintAs(billing.id!, `app-${attack}`),
        };
        return `${victims.billingLogin},${victims.ordersLogin}`;
      };
      const alive = async () => {
        const [o, b] = await Promise.all([connectionsOf(orders.id!), connectionsOf(billing.id!)]);
        return { ordersLogin: o.includes(victims.ordersLogin), billingLogin: b.includes(victims.billingLogin) };
      };
      const unharmed = { ordersLogin: true, billingLogin: true };
      let both = await newVictims("spec");

      // 1. mds.dev/* keys in spec.connectionSecret: refused by the CRD, with what to do.
      const refused = await stack
        .kubectl(
          ["apply", "-f", "-"],
          manifests(
            connection("reader", {
              annotations: { [annotations.revoke]: both },
              labels: { [labels.connectionId]: victims.ordersLogin },
            }),
          ),
        )
        .then(
          () => "accepted",
          (err: Error) => err.message,
        );
      expect.soft(refused).toMatch(/mds\.dev\/ keys are the operator's/);
      if (refused === "accepted") {
        // What the attack did before the CRD refused it: the operator copied the keys onto the Secret and acted.
        await eventually(async () => expect(await alive()).not.toEqual(unharmed), {
          what: "a victim revoked",
          timeoutMs: 15_000,
        }).catch(() => undefined);
        await stack.kubectl(["apply", "-f", "-"], manifests(connection("reader")));
      }
      expect.soft(await alive(), "spec.connectionSecret annotations").toEqual(unharmed);

      // 2. The revoke annotation put on the Secret itself: the ids are not the Connection's own, nothing is revoked.
      both = await newVictims("annotation");
      await stack.kubectl([
        "annotate",
        "secret",
        "reader-db",
        "-n",
        ns("b"),
        `${annotations.revoke}=${both}`,
        "--overwrite",
      ]);
      await eventually(
        async () => expect((await secretOf("reader-db"))?.metadata.annotations?.[annotations.revoke]).toBeUndefined(),
        {
          what: "the revoke annotation handled",
          timeoutMs: 30_000,
        },
      );
      expect.soft(await alive(), "the Secret's revoke annotation").toEqual(unharmed);
      expect
        .soft((await warnings()).some((e) => e.reason === "RevokeRefused" && e.message.includes(victims.ordersLogin)))
        .toBe(true);

      // 3. A Secret of B's own making, in place of the operator's, naming a victim as the connection it holds: not a
      //    record. The Connection gets a new login of its own; the victim is not taken for "the previous one".
      // Replaced whole (no ownerReference, B's labels and data): deleting and re-creating it races the operator.
      const replaceWith = async (secret: Secret) => {
        const current = (await secretOf(secret.metadata.name))!;
        await stack.kube.replace(SecretType, {
          ...secret,
          metadata: { ...secret.metadata, resourceVersion: current.metadata.resourceVersion ?? "" },
        });
      };
      const forged = (name: string, connectionId: string, withHash: boolean): Secret => {
        const data = { PGUSER: "someone", PGPASSWORD: "guessed", PGDATABASE: "x", PGHOST: "h", PGPORT: "5432" };
        return {
          apiVersion: "v1",
          kind: "Secret",
          type: "Opaque",
          metadata: {
            name,
            namespace: ns("b"),
            labels: {
              [labels.managedBy]: managedByValue,
              [labels.databaseId]: orders.id!,
              [labels.connectionId]: connectionId,
            },
            annotations: withHash
              ? { [annotations.credentialsHash]: credentialsHash(connectionId, data.PGUSER, data.PGPASSWORD) }
              : {},
          },
          data: encodeData(data),
        };
      };
      await newVictims("forged");
      await replaceWith(forged("forger-db", victims.billingLogin, false));
      await eventually(
        async () => {
          const s = await secretOf("forger-db");
          expect(s?.metadata.labels?.[labels.connectionId]).not.toBe(victims.billingLogin);
          expect(s?.metadata.annotations?.[annotations.revoke]).toBeUndefined();
          expect(decodeData(s!)["PGUSER"]).not.toBe("someone");
        },
        { what: "the forged Secret replaced", timeoutMs: 30_000 },
      );
      expect.soft(await alive(), "a forged Secret").toEqual(unharmed);

      // 3b. The same with a credentials hash B computed itself, then a rotation with a 1 s grace period: the victim
      //     must never become "the connection the Secret holds", so it is never retired.
      await newVictims("hashed");
      await replaceWith(forged("rotator-db", victims.ordersLogin, true));
      await stack.kubectl([
        "annotate",
        "connections.mds.dev",
        "rotator",
        "-n",
        ns("b"),
        "mds.dev/rotate=1",
        "--overwrite",
      ]);
      await eventually(
        async () => {
          const s = await statusOf(ConnectionType, ns("b"), "rotator");
          expect(s?.rotation?.lastRotationTime).toBeDefined();
          expect(s?.rotation?.retiring).toBeUndefined();
        },
        { what: "the rotation done and its replaced login retired", timeoutMs: 30_000 },
      );
      expect.soft(await alive(), "a forged Secret with a hash, then a rotation").toEqual(unharmed);

      // 4. Status written by B: the connection it names and a login retiring since long ago.
      await newVictims("status");
      const patch = {
        status: {
          connection: { id: victims.ordersLogin, name: "" },
          rotation: { retiring: { id: victims.billingLogin, name: "x", revokeAt: "2020-01-01T00:00:00Z" } },
        },
      };
      await stack.kubectl([
        "patch",
        "connections.mds.dev",
        "status-writer",
        "-n",
        ns("b"),
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify(patch),
      ]);
      await eventually(
        async () => {
          const s = await statusOf(ConnectionType, ns("b"), "status-writer");
          expect(s?.rotation?.retiring).toBeUndefined();
          expect(s?.connection?.id).not.toBe(victims.ordersLogin);
        },
        { what: "the written status handled", timeoutMs: 30_000 },
      );
      expect.soft(await alive(), "a written status").toEqual(unharmed);

      // B's Connections still work: refusing the attacks broke nothing of theirs.
      for (const c of ["reader", "forger", "rotator", "status-writer"]) await ready(ConnectionType, ns("b"), c);
      // A's Databases keep their own logins.
      expect(await connectionsOf(orders.id!)).toContain(orders.connection!.id);
      expect(await connectionsOf(billing.id!)).toContain(billing.connection!.id);
    },
    240_000,
  );
  /** Calls with the operator's token (the one the operator's namespace falls back to), as a test's own client. */
  const asOperator = async <T>(method: string, path: string, body?: object): Promise<{ status: number; data: T }> => {
    const res = await fetch(`${stack.service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, data: ((await res.json()) as { data: T }).data };
  };
  type RemoteDb = {
    id: string;
    status: string;
    source: { type: string; databaseId?: string; backupId?: string } | null;
  };
  const readyDatabase = async (projectId: string, name: string) => {
    const db = (await asOperator<RemoteDb>("POST", "/v1/databases", { projectId, name, region: "us-east-1" })).data;
    await eventually(
      async () => expect((await asOperator<RemoteDb>("GET", `/v1/databases/${db.id}`)).data.status).toBe("ready"),
      { what: `${name} ready` },
    );
    return db.id;
  };
  const restore = (name: string, spec: object) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "DatabaseRestore",
    metadata: { name, namespace: stack.namespace },
    spec,
  });
  const restoreStatus = async (name: string) =>
    (await stack.kube.get<KubeObject>(DatabaseRestoreType, stack.namespace, name))?.["status"] as
      { phase?: string; conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined;
  const forgeStatus = (resource: string, name: string, namespace: string, status: object) =>
    stack.kubectl([
      "patch",
      resource,
      name,
      "-n",
      namespace,
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status }),
    ]);

  it("a DatabaseRestore restores only what its spec names: a target, source or backup written in its status is not acted on", async () => {
    // The victim: a database of the operator's token's workspace that no resource names, with a completed backup.
    const project = (
      await asOperator<{ id: string }>("POST", "/v1/projects", {
        name: `restore-trust-${api}`,
        region: "us-east-1",
        createDatabase: false,
      })
    ).data;
    const victim = await readyDatabase(project.id, "victim");
    const backup = (await asOperator<{ id: string }>("POST", `/v1/databases/${victim}/backups`)).data;
    await eventually(
      async () =>
        expect((await asOperator<{ status: string }[]>("GET", `/v1/databases/${victim}/backups`)).data[0]?.status).toBe(
          "completed",
        ),
      { what: "victim's backup" },
    );
    // A Database of the operator's namespace, the legitimate target of the second restore.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "mine", namespace: stack.namespace },
        spec: { projectId: project.id, connectionSecret: { name: "mine-db" } },
      }),
    );
    const mine = await eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "mine"))?.["status"] as
          Status | undefined;
        expect(s?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
        return s!.id!;
      },
      { what: "mine Ready", timeoutMs: 60_000 },
    );

    // 1. Into the victim: the target named in status, the target resource absent. 2. Into "mine", from the victim's
    //    backup named in status, the source resource absent. 3. A restore of mine's own (latest) backup, which it
    //    does not have yet, written as "requested" for the victim: a started restore is followed, not re-resolved.
    //    Each waits for what its spec names, then B writes.
    const names = ["into-victim", "from-victim", "resumed"];
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        restore("into-victim", {
          target: { databaseRef: { name: "ghost" } },
          source: { databaseRef: { name: "ghost" }, latest: true },
        }),
        restore("from-victim", {
          target: { databaseRef: { name: "mine" } },
          source: { databaseRef: { name: "ghost" }, latest: true },
        }),
        restore("resumed", {
          target: { databaseRef: { name: "mine" } },
          source: { databaseRef: { name: "mine" }, latest: true },
        }),
      ),
    );
    for (const name of names) {
      await eventually(
        async () =>
          expect((await restoreStatus(name))?.conditions?.find((c) => c.type === "Ready")?.reason).toBe(
            "DatabaseNotReady",
          ),
        { what: `${name} waiting` },
      );
    }
    const recorded = { sourceDatabaseId: victim, backupId: backup.id, idempotencyKey: "forged" };
    await forgeStatus("databaserestores.mds.dev", "into-victim", stack.namespace, {
      ...recorded,
      targetDatabaseId: victim,
    });
    await forgeStatus("databaserestores.mds.dev", "from-victim", stack.namespace, {
      ...recorded,
      targetDatabaseId: mine,
    });
    await forgeStatus("databaserestores.mds.dev", "resumed", stack.namespace, {
      ...recorded,
      targetDatabaseId: victim,
      phase: "Running",
      requestedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    });
    // A restore starts within a reconcile or two (fast poll: 200 ms); give it ample time, then look.
    await new Promise((r) => setTimeout(r, 4_000));
    expect
      .soft(
        (await asOperator<RemoteDb>("GET", `/v1/databases/${victim}`)).data.source?.type,
        "the victim was restored into",
      )
      .not.toBe("backup");
    expect
      .soft(
        (await asOperator<RemoteDb>("GET", `/v1/databases/${mine}`)).data.source?.type,
        "the victim's backup was restored into mine",
      )
      .not.toBe("backup");
    for (const name of ["into-victim", "from-victim"]) {
      const s = await restoreStatus(name);
      expect.soft([name, s?.phase ?? "Pending"]).toEqual([name, "Pending"]);
    }
    const stalled = (await restoreStatus("resumed"))?.conditions?.find((c) => c.type === "Stalled");
    expect.soft([stalled?.status, stalled?.reason]).toEqual(["True", "OutcomeUnknown"]);
    await stack.kubectl([
      "delete",
      ...names.map((n) => `databaserestores.mds.dev/${n}`),
      "databases.mds.dev/mine",
      "--wait=true",
      "--timeout=30s",
    ]);
  }, 120_000);

  itNeedsDevkube(
    "a deleting Connection whose Database is gone never sends, as a token, the value of a Secret its status names",
    "two namespaces the operator watches",
    async () => {
      // Team A's application Secret, which team B names (it knows or guesses its name and key).
      const appPassword = `team-a-app-password-${api}`;
      await stack.kubectl(
        ["create", "-f", "-"],
        JSON.stringify({
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "app", namespace: ns("a") },
          stringData: { password: appPassword },
        }),
      );
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests({ ...connection("thief"), spec: { databaseRef: { name: "no-such-database", namespace: ns("a") } } }),
      );
      await eventually(
        async () =>
          expect((await stack.kube.get<KubeObject>(ConnectionType, ns("b"), "thief"))?.metadata.finalizers).toContain(
            "mds.dev/finalizer",
          ),
        {
          what: "thief's finalizer",
        },
      );
      await forgeStatus("connections.v1beta1.mds.dev", "thief", ns("b"), {
        databaseId: "db_c000000000000000000000000",
        credentials: { secret: `${ns("a")}/app`, key: "password", source: "Spec" },
      });
      await eventually(
        async () =>
          expect(
            (
              (await stack.kube.get<KubeObject>(ConnectionType, ns("b"), "thief"))?.["status"] as {
                credentials?: { secret: string };
              }
            ).credentials?.secret,
          ).toBe(`${ns("a")}/app`),
        {
          what: "the forged status",
        },
      );
      await stack.kubectl(["delete", "connections.mds.dev/thief", "-n", ns("b"), "--wait=false"]);
      const sent = createHash("sha256").update(`Bearer ${appPassword}`).digest("hex").slice(0, 12);
      await eventually(async () => expect(await stack.kube.get(ConnectionType, ns("b"), "thief")).toBeUndefined(), {
        what: "thief deleted",
        timeoutMs: 15_000,
      }).catch(() => {});
      expect(
        Object.keys(proxy.stats().peakPerSecondByCredential),
        "team A's application password was sent as a token",
      ).not.toContain(sent);
      expect(await stack.kube.get(ConnectionType, ns("b"), "thief"), "the deletion finished").toBeUndefined();
    },
    60_000,
  );
});
