import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Clones: a Database whose spec.source is another Database starts with that database's data; a
// clone of a source that is missing or not ready waits (Ready=False SourceNotReady, retried, not Stalled) and
// creates nothing until the source is ready.

let stack: Stack;

type Condition = { type: string; status: string; reason: string; message: string };

const project = () => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Project",
  metadata: { name: "clones", namespace: stack.namespace },
  spec: { region: "us-east-1" },
});
const database = (name: string, extra: object = {}) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec: { projectRef: { name: "clones" }, ...extra },
});

async function statusOf(name: string) {
  return (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as
    { conditions?: Condition[]; source?: Record<string, unknown>; id?: string } | undefined;
}
const conditionOf = async (name: string, type: string) =>
  (await statusOf(name))?.conditions?.find((c) => c.type === type);

async function waitReady(name: string) {
  return eventually(
    async () => {
      const c = await conditionOf(name, "Ready");
      if (c?.status !== "True") throw new Error(`${name} not ready: ${JSON.stringify(c)}`);
      return (await statusOf(name))!;
    },
    { what: `Database ${name} Ready` },
  );
}

async function secretUrl(name: string) {
  const s = await stack.kube.get<Secret>(SecretType, stack.namespace, name);
  if (s === undefined) throw new Error(`Secret ${name} missing`);
  return decodeData(s)["DATABASE_URL"]!;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

/** Remote databases created for the resource `name` (by the logicalId the operator gives it), asked of our service. */
async function remoteCount(name: string): Promise<number> {
  const logicalId = encodeURIComponent(`k8s:e2e:${stack.namespace}/${name}`);
  const res = await fetch(`${stack.service.url}/v1/databases?logicalId=${logicalId}`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: unknown[] }).data.length;
}

/** A completed backup of the database, taken at our service (the e2e token's workspace). */
async function completedBackup(databaseId: string): Promise<void> {
  const headers = { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" };
  const url = `${stack.service.url}/v1/databases/${databaseId}/backups`;
  const created = await fetch(url, { method: "POST", headers, body: "{}" });
  expect(created.status).toBe(201);
  const { id } = ((await created.json()) as { data: { id: string } }).data;
  await eventually(
    async () => {
      const list = (await (await fetch(url, { headers })).json()) as { data: { id: string; status: string }[] };
      if (list.data.find((b) => b.id === id)?.status !== "completed") throw new Error(`backup ${id} not completed`);
    },
    { what: `backup of ${databaseId} completed` },
  );
}

describe.each(counterparts)("against %s", (counterpart) => {
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    await stack.startOperator();
  }, 120_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("a Database cloned from staging (databaseRef) has staging's rows and mirrors status.source", async () => {
    await stack.kubectl(["apply", "-f", "-"], manifests(project(), database("staging")));
    const staging = await waitReady("staging");
    await query(
      await secretUrl("staging"),
      "create table orders (id int primary key, item text); insert into orders values (1, 'from staging')",
    );

    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("preview", { source: { type: "database", databaseRef: { name: "staging" } } })),
    );
    const preview = await waitReady("preview");
    expect(preview.source).toEqual({ type: "database", databaseId: staging.id });
    expect(preview.id).not.toBe(staging.id);
    expect(await query(await secretUrl("preview"), "select id, item from orders")).toEqual([
      { id: 1, item: "from staging" },
    ]);
    // A copy, not a shared database: a write to the clone leaves staging as it was.
    await query(await secretUrl("preview"), "insert into orders values (2, 'preview only')");
    expect(await query(await secretUrl("staging"), "select count(*)::int as n from orders")).toEqual([{ n: 1 }]);
  }, 180_000);

  it("a clone of a missing source waits (SourceNotReady, not Stalled), creates nothing, then clones once the source is ready", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("early-clone", { source: { type: "database", databaseRef: { name: "late-source" } } })),
    );
    const waiting = await eventually(
      async () => {
        const c = await conditionOf("early-clone", "Ready");
        if (c?.reason !== "SourceNotReady") throw new Error(`not waiting yet: ${JSON.stringify(c)}`);
        return c;
      },
      { what: "early-clone SourceNotReady" },
    );
    expect(waiting.status).toBe("False");
    expect(waiting.message).toContain('"late-source"');
    expect((await conditionOf("early-clone", "Stalled"))?.status ?? "False").toBe("False");
    expect(await remoteCount("early-clone")).toBe(0);

    await stack.kubectl(["apply", "-f", "-"], manifests(database("late-source")));
    const source = await waitReady("late-source");
    await query(await secretUrl("late-source"), "create table marker (v text); insert into marker values ('late')");
    // The source became ready before the row was written, so the clone may or may not hold it; it must exist and connect.
    const clone = await waitReady("early-clone");
    expect(clone.source).toEqual({ type: "database", databaseId: source.id });
    expect(await remoteCount("early-clone")).toBe(1);
    expect(await query(await secretUrl("early-clone"), "select 1 as one")).toEqual([{ one: 1 }]);
  }, 180_000);

  it("a clone by databaseId without spec.credentials is refused (Stalled InvalidSpec) and creates nothing", async () => {
    const staging = await statusOf("staging");
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("by-id", { source: { type: "database", databaseId: staging!.id } })),
    );
    const stalled = await eventually(
      async () => {
        const c = await conditionOf("by-id", "Stalled");
        if (c?.status !== "True") throw new Error(`not stalled yet: ${JSON.stringify(c)}`);
        return c;
      },
      { what: "by-id Stalled" },
    );
    expect(stalled.reason).toBe("InvalidSpec");
    expect(stalled.message).toContain("spec.credentials");
    expect(await remoteCount("by-id")).toBe(0);
  }, 120_000);

  it("a Database from a backup by databaseId without spec.credentials is refused too: the operator's token copies nothing named by id", async () => {
    // Attack: a namespace allowed to use the operator's token names another team's database id (same workspace)
    // as a backup source; before, the operator created a copy of that team's data with its own token.
    const staging = await statusOf("staging");
    // A completed backup exists, so without the rule the copy would be made (not merely wait for a backup).
    await completedBackup(staging!.id!);
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(database("backup-by-id", { source: { type: "backup", databaseId: staging!.id, latest: true } })),
    );
    const stalled = await eventually(
      async () => {
        const c = await conditionOf("backup-by-id", "Stalled");
        if (c?.status !== "True") throw new Error(`not stalled yet: ${JSON.stringify(c)}`);
        return c;
      },
      { what: "backup-by-id Stalled" },
    );
    expect(stalled.reason).toBe("InvalidSpec");
    expect(stalled.message).toContain("spec.credentials");
    expect(await remoteCount("backup-by-id")).toBe(0);
  }, 120_000);
});
