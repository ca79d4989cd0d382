import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType, ProjectType } from "../../src/resources/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// apply → Ready → the Secret's DATABASE_URL connects; a deleted or edited Secret is rebuilt with working
// credentials; Retain keeps remote and Secret and a re-applied resource adopts both; Delete removes both.

let stack: Stack;
let operator: Operator;

const project = (name: string, extra: object = {}) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Project",
  metadata: { name, namespace: stack.namespace },
  spec: { region: "us-east-1", ...extra },
});
const database = (name: string, spec: object) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec,
});

async function readyCondition(type: typeof DatabaseType, name: string) {
  const obj = await stack.kube.get<KubeObject>(type, stack.namespace, name);
  const status = obj?.["status"] as
    { conditions?: { type: string; status: string; reason: string; message: string }[] } | undefined;
  return status?.conditions?.find((c) => c.type === "Ready");
}

async function waitReady(type: typeof DatabaseType, name: string) {
  return eventually(
    async () => {
      const c = await readyCondition(type, name);
      if (c?.status !== "True") throw new Error(`${name} not ready: ${JSON.stringify(c)}`);
      return (await stack.kube.get<KubeObject>(type, stack.namespace, name))!;
    },
    { what: `${type.kind} ${name} Ready` },
  );
}

async function secretData(name: string): Promise<Record<string, string>> {
  const s = await stack.kube.get<Secret>(SecretType, stack.namespace, name);
  if (s === undefined) throw new Error(`Secret ${name} missing`);
  return decodeData(s);
}

async function connects(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const r = await client.query<{ one: number }>("select 1 as one");
    return r.rows[0]!.one;
  } finally {
    await client.end();
  }
}

// Every promise against both counterparts: our service, and the public-API emulator in front of it.
describe.each(counterparts)("Database lifecycle against %s", (api) => {
  beforeAll(async () => {
    stack = await startStack({ api });
    operator = await stack.startOperator();
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it("applies a Project and a Database with kubectl, becomes Ready, and the Secret's DATABASE_URL connects", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(project("shop"), database("orders", { projectRef: { name: "shop" } })),
    );
    const db = await waitReady(DatabaseType, "orders");
    const status = db["status"] as { id: string; remoteStatus: string; secretName: string; connection: { id: string } };
    expect(status.id).toMatch(/^db_/);
    expect(status.remoteStatus).toBe("ready");
    const data = await secretData(status.secretName);
    expect(Object.keys(data)).toEqual(
      expect.arrayContaining([
        "DATABASE_URL",
        "DIRECT_URL",
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
        "PGSSLMODE",
      ]),
    );
    expect(await connects(data["DATABASE_URL"]!)).toBe(1);
    expect(await connects(data["DIRECT_URL"]!)).toBe(1);
    const secret = (await stack.kube.get<Secret>(SecretType, stack.namespace, "orders"))!;
    expect(secret.metadata.labels?.["mds.dev/database-id"]).toBe(status.id);
    expect(secret.metadata.labels?.["mds.dev/connection-id"]).toBe(status.connection.id);
    expect(secret.metadata.annotations?.["mds.dev/data-hash"]).toMatch(/^[0-9a-f]{64}$/);
    const printed = await stack.kubectl(["get", "mdsdb", "orders"]);
    expect(printed).toContain("True");
  });

  it("rebuilds a deleted Secret and an edited one with working credentials", async () => {
    await stack.kubectl(["delete", "secret", "orders"]);
    const rebuilt = await eventually(
      async () => {
        const d = await secretData("orders");
        return d;
      },
      { what: "Secret rebuilt" },
    );
    expect(await connects(rebuilt["DATABASE_URL"]!)).toBe(1);

    await stack.kubectl([
      "patch",
      "secret",
      "orders",
      "--type=merge",
      "-p",
      JSON.stringify({ stringData: { PGPASSWORD: "wrong", DATABASE_URL: "postgresql://x:y@nowhere/z" } }),
    ]);
    const fixed = await eventually(
      async () => {
        const d = await secretData("orders");
        if (d["PGPASSWORD"] === "wrong") throw new Error("not rebuilt yet");
        return d;
      },
      { what: "edited Secret rebuilt" },
    );
    expect(await connects(fixed["DATABASE_URL"]!)).toBe(1);
    await waitReady(DatabaseType, "orders");
  });

  it("Retain keeps the remote database and the Secret; a re-applied Database adopts both", async () => {
    const before = (await waitReady(DatabaseType, "orders"))["status"] as { id: string };
    const data = await secretData("orders");
    await stack.kubectl(["delete", "mdsdb", "orders", "--wait=true"]);
    const kept = (await stack.kube.get<Secret>(SecretType, stack.namespace, "orders"))!;
    expect(kept.metadata.ownerReferences ?? []).toEqual([]);
    expect(kept.metadata.labels?.["mds.dev/database-id"]).toBe(before.id);
    expect(await connects(data["DATABASE_URL"]!)).toBe(1);

    await stack.kubectl(["apply", "-f", "-"], manifests(database("orders", { projectRef: { name: "shop" } })));
    const again = (await waitReady(DatabaseType, "orders"))["status"] as { id: string };
    expect(again.id).toBe(before.id);
    const after = await secretData("orders");
    expect(after["PGPASSWORD"]).toBe(data["PGPASSWORD"]);
  });

  it("Delete removes the remote database and the Secret; a Project with Delete goes after its databases", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        project("temp", { deletionPolicy: "Delete" }),
        database("scratch", { projectRef: { name: "temp" }, deletionPolicy: "Delete" }),
      ),
    );
    const db = (await waitReady(DatabaseType, "scratch"))["status"] as { id: string };
    const proj = (await waitReady(ProjectType as typeof DatabaseType, "temp"))["status"] as { id: string };
    await stack.kubectl(["delete", "mdsproject", "temp", "--wait=false"]);
    // The project waits for its database.
    await eventually(
      async () => {
        const c = await readyCondition(ProjectType as typeof DatabaseType, "temp");
        if (c?.reason !== "WaitingForDatabases") throw new Error(JSON.stringify(c));
      },
      { what: "WaitingForDatabases" },
    );
    await stack.kubectl(["delete", "mdsdb", "scratch", "--wait=true"]);
    await eventually(
      async () => {
        if ((await stack.kube.get(ProjectType, stack.namespace, "temp")) !== undefined)
          throw new Error("project still there");
      },
      { what: "project finalized" },
    );
    expect(await stack.kube.get(SecretType, stack.namespace, "scratch")).toBeUndefined();
    const res = await fetch(`${stack.service.url}/v1/databases/${db.id}`, {
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    expect(res.status).toBe(404);
    const pres = await fetch(`${stack.service.url}/v1/projects/${proj.id}`, {
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    expect(pres.status).toBe(404);
  });

  it("a Project with connectionSecret publishes its default database's Secret, which connects", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        project("withdb", {
          connectionSecret: {
            name: "withdb-db",
            endpoint: "direct",
            template: { JDBC_URL: "jdbc:postgresql://{{host}}:{{port}}/{{database}}" },
          },
        }),
      ),
    );
    const p = (await waitReady(ProjectType as typeof DatabaseType, "withdb"))["status"] as {
      id: string;
      defaultDatabase: { id: string; status: string };
      secretName: string;
    };
    expect(p.defaultDatabase.status).toBe("ready");
    expect(p.secretName).toBe("withdb-db");
    const data = await secretData("withdb-db");
    expect(data["DATABASE_URL"]).toBe(data["DIRECT_URL"]);
    expect(data["JDBC_URL"]).toMatch(/^jdbc:postgresql:\/\/[^/]+:\d+\/\S+$/);
    expect(await connects(data["DATABASE_URL"]!)).toBe(1);
  });

  it("externalId adopts an existing remote database and mints a connection for its Secret", async () => {
    const shop = (await stack.kube.get<KubeObject>(ProjectType, stack.namespace, "shop"))!["status"] as { id: string };
    const res = await fetch(`${stack.service.url}/v1/projects/${shop.id}/databases`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "legacy" }),
    });
    const created = ((await res.json()) as { data: { id: string } }).data;
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("legacy", { projectRef: { name: "shop" }, externalId: created.id })),
    );
    const s = (await waitReady(DatabaseType, "legacy"))["status"] as { id: string };
    expect(s.id).toBe(created.id);
    expect(await connects((await secretData("legacy"))["DATABASE_URL"]!)).toBe(1);
    const events = await stack.kubectl([
      "get",
      "events",
      "--field-selector",
      "involvedObject.name=legacy",
      "-o",
      "json",
    ]);
    const reasons = (JSON.parse(events) as { items: { reason: string }[] }).items.map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(["SecretRebuilt"]));
  });

  it("leaves no token, password or connection string in any log, event or status", async () => {
    const all = stack.logs.join("");
    expect(all.length).toBeGreaterThan(0);
    expect(all).not.toContain("postgresql://");
    expect(await stack.leaks()).toBe("");
    expect(operator.isReady()).toBe(true);
    // Against the emulator, it really stood in the path (and listed its foreign objects to the operator).
    if (api === "emulator") expect(stack.emulator!.stats.requests).toBeGreaterThan(10);
  });
});
