import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import type { Operator } from "../../src/operator/index.ts";
import { ConnectionType, DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// The Connection kind with the real kubectl: one revocable login per app, in the Database's namespace or in one the
// Database allows; refused before anything is minted otherwise; revoked when the resource is deleted.

describe.each(counterparts)("Connection against %s", (api) => {
  let stack: Stack;
  let operator: Operator;
  // The apps' namespace comes from the stack: created before the operator starts, watched by it, cleaned up after.
  const apps = () => stack.namespaceOf("apps");

  beforeAll(async () => {
    stack = await startStack({ api, namespaces: ["apps"] });
    operator = await stack.startOperator();
  });
  afterAll(async () => {
    await operator?.stop();
    await stack?.stop();
  });

  const statusOf = async (ns: string, name: string) =>
    (await stack.kube.get<KubeObject>(ConnectionType, ns, name))?.["status"] as
      { id?: string; conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined;
  const condition = async (ns: string, name: string, type: string) =>
    (await statusOf(ns, name))?.conditions?.find((c) => c.type === type);
  const urlOf = async (ns: string, secret: string) => {
    const s = await stack.kube.get<Secret>(SecretType, ns, secret);
    return s === undefined ? undefined : decodeData(s)["DATABASE_URL"];
  };
  const connects = async (url: string) => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      return (await client.query<{ one: number }>("select 1 as one")).rows[0]?.one === 1;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const connectionsOfDatabase = async () => {
    const db = await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "shared");
    const id = (db?.["status"] as { id?: string } | undefined)?.id;
    const res = await fetch(`${stack.service.url}/v1/databases/${id}`, {
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    return ((await res.json()) as { data: { connections: { id: string }[] } }).data.connections.map((c) => c.id);
  };
  const connection = (ns: string, name: string, databaseNamespace?: string) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Connection",
    metadata: { name, namespace: ns },
    spec: {
      databaseRef: { name: "shared", ...(databaseNamespace === undefined ? {} : { namespace: databaseNamespace }) },
      connectionSecret: { name: `${name}-db`, endpoint: "direct" },
    },
  });

  it("gives each app its own login, across namespaces only where the Database allows, and revokes it on delete or when the grant is withdrawn", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "team", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "shared", namespace: stack.namespace },
          spec: { projectRef: { name: "team" }, connectionSecret: { name: "shared-db" } },
        },
        connection(stack.namespace, "reporting"),
        connection(apps(), "billing", stack.namespace),
      ),
    );
    // Same namespace: Ready, its own login, which connects.
    await eventually(
      async () => expect((await condition(stack.namespace, "reporting", "Ready"))?.status).toBe("True"),
      { what: "reporting Ready", timeoutMs: 60_000 },
    );
    const reporting = (await urlOf(stack.namespace, "reporting-db"))!;
    expect(await connects(reporting)).toBe(true);
    expect(new URL(reporting).username).not.toBe(new URL((await urlOf(stack.namespace, "shared-db"))!).username);

    // Another namespace, not allowed: refused with what to do, and nothing minted.
    const before = await connectionsOfDatabase();
    const refused = await eventually(
      async () => {
        const c = await condition(apps(), "billing", "Synced");
        if (c?.reason !== "ReferenceNotAllowed") throw new Error(`not refused yet: ${JSON.stringify(c)}`);
        return c;
      },
      { what: "billing refused" },
    );
    expect(refused.message).toContain(`add "${apps()}" to its spec.connectionPolicy.allowedNamespaces`);
    expect(await urlOf(apps(), "billing-db")).toBeUndefined();
    expect((await connectionsOfDatabase()).sort()).toEqual(before.sort());

    // The Database's owner allows the namespace: the waiting Connection is woken and served.
    await stack.kubectl([
      "patch",
      "mdsdb",
      "shared",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { connectionPolicy: { allowedNamespaces: [apps()] } } }),
    ]);
    await eventually(async () => expect((await condition(apps(), "billing", "Ready"))?.status).toBe("True"), {
      what: "billing Ready",
      timeoutMs: 60_000,
    });
    const billing = (await urlOf(apps(), "billing-db"))!;
    expect(await connects(billing)).toBe(true);

    // Deleting a Connection (deletionPolicy Delete by default) revokes its login and removes its Secret.
    const id = (await statusOf(stack.namespace, "reporting"))?.id;
    await stack.kubectl(["delete", "mdsconn", "reporting", "--wait=true"]);
    expect(await connectsEventuallyRefused(reporting)).toBe(true);
    expect(await connectionsOfDatabase()).not.toContain(id);
    expect(await stack.kube.get<Secret>(SecretType, stack.namespace, "reporting-db")).toBeUndefined();
    expect(await connects(billing)).toBe(true);

    // The owner withdraws the grant: the login is revoked and its Secret deleted, at once, not at deletion.
    const billingId = (await statusOf(apps(), "billing"))?.id;
    await stack.kubectl([
      "patch",
      "mdsdb",
      "shared",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { connectionPolicy: { allowedNamespaces: [] } } }),
    ]);
    await eventually(
      async () => expect((await condition(apps(), "billing", "Stalled"))?.reason).toBe("ReferenceNotAllowed"),
      { what: "billing withdrawn" },
    );
    expect(await connectsEventuallyRefused(billing)).toBe(true);
    expect(await connectionsOfDatabase()).not.toContain(billingId);
    await eventually(async () => expect(await urlOf(apps(), "billing-db")).toBeUndefined(), {
      what: "billing Secret deleted",
    });
    // Granted again: a new login, which connects.
    await stack.kubectl([
      "patch",
      "mdsdb",
      "shared",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { connectionPolicy: { allowedNamespaces: [apps()] } } }),
    ]);
    await eventually(async () => expect((await condition(apps(), "billing", "Ready"))?.status).toBe("True"), {
      what: "billing Ready again",
      timeoutMs: 60_000,
    });
    const again = (await urlOf(apps(), "billing-db"))!;
    expect(new URL(again).username).not.toBe(new URL(billing).username);
    expect(await connects(again)).toBe(true);

    // The Database resource goes first (Retain: the database stays); deleting the Connection still revokes its login,
    // with the token of the Database's namespace that status recorded.
    expect(
      ((await statusOf(apps(), "billing")) as { credentials?: { secret: string } } | undefined)?.credentials?.secret,
    ).toBe(`${stack.namespace}/mds-credentials`);
    await stack.kubectl(["delete", "mdsdb", "shared", "--wait=true", "--timeout=60s"]);
    await stack.kubectl(["delete", "mdsconn", "billing", "-n", apps(), "--wait=true", "--timeout=60s"]);
    expect(await connectsEventuallyRefused(again)).toBe(true);
    expect(await stack.leaks()).toBe("");
  }, 120_000);

  async function connectsEventuallyRefused(url: string): Promise<boolean> {
    await eventually(
      async () => {
        if (await connects(url)) throw new Error("the revoked login still connects");
      },
      { what: "revoked login refused", timeoutMs: 20_000 },
    );
    return true;
  }
});
