import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// spec.branch: a Database on a branch of its project by git name. A preview waits while the
// project has no branch (the first would be its undeletable production branch); the database is created with the
// branch's id and the logicalId, so a crash after the branch's or the database's POST creates neither twice; a
// preview branch is soft-deleted with its last database.

let stack: Stack;
type Condition = { type: string; status: string; reason: string; message: string };
type Status = { id?: string; branch?: { id: string; gitName: string; role: string }; conditions?: Condition[] };

class SimulatedCrash extends Error {}

const project = () => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Project",
  metadata: { name: "shop", namespace: stack.namespace },
  spec: { region: "us-east-1" },
});
const database = (name: string, branch: object, extra: object = {}) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec: { projectRef: { name: "shop" }, branch, deletionPolicy: "Delete", ...extra },
});
const apply = (...objs: object[]) => stack.kubectl(["apply", "-f", "-"], manifests(...objs));

async function statusOf(name: string): Promise<Status | undefined> {
  return (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as Status | undefined;
}
const waitCondition = (name: string, type: string, want: Partial<Condition>) =>
  eventually(
    async () => {
      const c = (await statusOf(name))?.conditions?.find((x) => x.type === type);
      for (const [k, v] of Object.entries(want))
        if (c?.[k as keyof Condition] !== v) throw new Error(`${name} ${type}: ${JSON.stringify(c)}`);
      return (await statusOf(name))!;
    },
    { what: `${name} ${type} ${JSON.stringify(want)}`, timeoutMs: 90_000 },
  );

/** Our service, with the e2e token: what exists remotely, whichever counterpart the operator talks to. */
async function remote<T>(path: string): Promise<T> {
  const res = await fetch(`${stack.service.url}${path}`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: T }).data;
}
const projectId = async () =>
  (
    (
      await stack.kube.get<KubeObject>(
        { ...DatabaseType, plural: "projects", kind: "Project" },
        stack.namespace,
        "shop",
      )
    )?.["status"] as { id: string }
  ).id;
const branchesNamed = async (gitName: string) =>
  remote<{ id: string; role: string }[]>(
    `/v1/projects/${await projectId()}/branches?gitName=${encodeURIComponent(gitName)}`,
  );
const databasesOf = (name: string, branchId: string) =>
  remote<{ id: string; branchId: string }[]>(
    `/v1/databases?branchId=${branchId}&logicalId=${encodeURIComponent(`k8s:e2e:${stack.namespace}/${name}`)}`,
  );

async function query(name: string, sql: string) {
  const s = await stack.kube.get<Secret>(SecretType, stack.namespace, name);
  const client = new pg.Client({ connectionString: decodeData(s!)["DATABASE_URL"]! });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

/** An operator that "dies" at the named point, as a killed process: it throws there and never writes again. */
async function crashingOperator(point: string): Promise<{ operator: Operator; crashed: () => boolean }> {
  let dead = false;
  const operator = await stack.startOperator({
    canWrite: () => !dead,
    crashPoint: (name) => {
      if (name === point && !dead) {
        dead = true;
        throw new SimulatedCrash(`simulated crash at ${name}`);
      }
    },
  });
  return { operator, crashed: () => dead };
}

describe.each(counterparts)("against %s", (counterpart) => {
  let operator: Operator | undefined;
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
  }, 120_000);
  afterAll(async () => {
    await operator?.stop();
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("a preview waits (NoProductionBranch) while the project has no branch, then goes on a preview branch", async () => {
    operator = await stack.startOperator();
    await apply(project(), database("pr-1", { gitName: "feature/one" }));
    // A wait, retried (not Stalled); Synced says why (Ready keeps the first reason it was given while not created).
    const waiting = await waitCondition("pr-1", "Synced", { status: "False", reason: "NoProductionBranch" });
    expect(waiting.conditions?.find((c) => c.type === "Ready")?.status).toBe("False");
    expect(waiting.conditions?.find((c) => c.type === "Stalled")?.status ?? "False").toBe("False");
    expect(await branchesNamed("feature/one")).toEqual([]);

    await apply(database("staging", { gitName: "main", role: "production" }, { deletionPolicy: "Retain" }));
    const staging = await waitCondition("staging", "Ready", { status: "True" });
    expect(staging.branch).toMatchObject({ gitName: "main", role: "production" });
    const preview = await waitCondition("pr-1", "Ready", { status: "True" });
    expect(preview.branch).toMatchObject({ gitName: "feature/one", role: "preview" });
    expect(await databasesOf("pr-1", preview.branch!.id)).toEqual([
      expect.objectContaining({ id: preview.id, branchId: preview.branch!.id }),
    ]);
    expect(await query("pr-1", "select 1 as one")).toEqual([{ one: 1 }]);
  }, 240_000);

  it("a role that does not match the branch is refused (Stalled BranchRoleMismatch) and creates nothing", async () => {
    await apply(database("wrong-role", { gitName: "feature/one", role: "production" }));
    const stalled = await waitCondition("wrong-role", "Stalled", { status: "True", reason: "BranchRoleMismatch" });
    expect(stalled.id).toBeUndefined();
    await stack.kubectl(["delete", "databases.mds.dev/wrong-role", "--wait=true", "--timeout=60s"]);
  }, 120_000);

  for (const point of ["database:after-branch-create", "database:after-create"]) {
    it(`a crash at ${point} creates one branch and one database on it`, async () => {
      await operator?.stop();
      const name = point.endsWith("branch-create") ? "crash-branch" : "crash-db";
      const gitName = `feature/${name}`;
      const crashing = await crashingOperator(point);
      await apply(database(name, { gitName }));
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: `the crash at ${point}` },
      );
      await crashing.operator.stop();
      operator = await stack.startOperator();
      const s = await waitCondition(name, "Ready", { status: "True" });
      const branches = await branchesNamed(gitName);
      expect(branches).toEqual([expect.objectContaining({ id: s.branch!.id, role: "preview" })]);
      expect((await databasesOf(name, s.branch!.id)).map((d) => d.id)).toEqual([s.id]);
    }, 240_000);
  }

  it("deleting the last Database of a preview branch deletes the database and soft-deletes the branch; production stays", async () => {
    const s = (await statusOf("pr-1"))!;
    await stack.kubectl(["delete", "databases.mds.dev/pr-1", "--wait=true", "--timeout=90s"]);
    const gone = await fetch(`${stack.service.url}/v1/databases/${s.id}`, {
      headers: { authorization: `Bearer ${stack.service.token}` },
    });
    expect(gone.status).toBe(404);
    expect(await branchesNamed("feature/one")).toEqual([]);
    expect(await branchesNamed("main")).toEqual([expect.objectContaining({ role: "production" })]);
  }, 120_000);
});
