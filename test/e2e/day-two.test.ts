import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseType, ProjectType } from "../../src/resources/types.ts";
import { startKeyRecorder, type KeyRecorder } from "../support/key-recorder.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// The user's day two, against both counterparts: a Database deleted and applied again within the
// service's 24 h replay window, an expired preview applied again, a pull request closed and reopened. Each gets a new
// remote database (and branch) with its source's data, never the deleted one's answer replayed, also through a crash
// right after each create. Every POST goes through a recorder, so the test sees every Idempotency-Key the operator
// sends: none of a second incarnation is one of the first's.

let stack: Stack;
let recorder: KeyRecorder;

type Condition = { type: string; status: string; reason: string; message: string };
type Status = {
  id?: string;
  branch?: { id: string; gitName: string; role: string };
  source?: { type: string; databaseId: string };
  conditions?: Condition[];
};

class SimulatedCrash extends Error {}

const project = {
  apiVersion: "mds.dev/v1alpha1",
  kind: "Project",
  metadata: { name: "shop" },
  spec: { region: "us-east-1" },
};
const database = (name: string, extra: object = {}) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "Database",
  metadata: { name, namespace: stack.namespace },
  spec: { projectRef: { name: "shop" }, deletionPolicy: "Delete", ...extra },
});
const cloneOfStaging = { source: { type: "database", databaseRef: { name: "staging" } } };
const preview = (name: string, gitName: string, extra: object = {}) =>
  database(name, { branch: { gitName }, ...cloneOfStaging, ...extra });
const apply = (...objs: object[]) => stack.kubectl(["apply", "-f", "-"], manifests(...objs));

const statusOf = async (name: string) =>
  (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name))?.["status"] as Status | undefined;
const condition = async (name: string, type: string) =>
  (await statusOf(name))?.conditions?.find((c) => c.type === type);
const ready = (name: string) =>
  eventually(
    async () => {
      const c = await condition(name, "Ready");
      if (c?.status !== "True") throw new Error(`${name} not ready: ${JSON.stringify(c)}`);
      return (await statusOf(name))!;
    },
    { what: `${name} Ready`, timeoutMs: 120_000 },
  );
const gone = (name: string) =>
  eventually(
    async () => {
      if ((await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, name)) !== undefined)
        throw new Error(`${name} still there`);
    },
    { what: `${name} deleted`, timeoutMs: 120_000 },
  );
async function deleteDatabase(name: string) {
  await stack.kubectl(["delete", `databases.mds.dev/${name}`, "--wait=false"]);
  await gone(name);
}

/** Our service itself, with the e2e token: what exists remotely, whichever counterpart the operator talks to. */
async function remote<T>(path: string): Promise<{ status: number; data: T }> {
  const res = await fetch(`${stack.service.url}${path}`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  return { status: res.status, data: ((await res.json()) as { data: T }).data };
}
const projectId = async () =>
  ((await stack.kube.get<KubeObject>(ProjectType, stack.namespace, "shop"))?.["status"] as { id: string }).id;
const liveBranches = async (gitName: string) =>
  (await remote<{ id: string }[]>(`/v1/projects/${await projectId()}/branches?gitName=${encodeURIComponent(gitName)}`))
    .data;
/** The live remote databases of the resource `name` (by the logicalId the operator gives it). */
const liveDatabases = async (name: string) =>
  (
    await remote<{ id: string }[]>(
      `/v1/databases?logicalId=${encodeURIComponent(`k8s:e2e:${stack.namespace}/${name}`)}`,
    )
  ).data;

async function query(name: string, sql: string) {
  const s = await stack.kube.get<Secret>(SecretType, stack.namespace, name);
  const client = new pg.Client({ connectionString: decodeData(s!)["DATABASE_URL"]! });
  await client.connect();
  try {
    return (await client.query(sql)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}
const items = (name: string) => query(name, "select name from items order by name");

/** Warning Events of one object, by reason. */
async function warnings(name: string): Promise<string[]> {
  const list = JSON.parse(
    await stack.kubectl(["get", "events", "--field-selector", `involvedObject.name=${name}`, "-o", "json"]),
  ) as { items: { type: string; reason: string }[] };
  return list.items.filter((e) => e.type === "Warning").map((e) => e.reason);
}

/** An operator that "dies" at the named point, as a killed process: it throws there and never writes again. */
async function crashingOperator(point: string): Promise<{ operator: Operator; crashed: () => boolean }> {
  let dead = false;
  const operator = await stack.startOperator({
    apiUrl: recorder.url,
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
    recorder = await startKeyRecorder(stack.emulator?.url ?? stack.service.url);
    operator = await stack.startOperator({ apiUrl: recorder.url });
    await apply(
      { ...project, metadata: { ...project.metadata, namespace: stack.namespace } },
      database("staging", { branch: { gitName: "main", role: "production" }, deletionPolicy: "Retain" }),
    );
    await ready("staging");
    await query("staging", "create table items (name text primary key); insert into items values ('mug')");
  }, 180_000);
  afterAll(async () => {
    await operator?.stop();
    await recorder?.stop();
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("deleted and applied again within the replay window: plain, clone, from a backup and preview each get a new database with the source's data", async () => {
    const staging = (await statusOf("staging"))!;
    // The backup the third one starts from, taken at our service (the public API's provider takes its own).
    const headers = { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" };
    const taken = await fetch(`${stack.service.url}/v1/databases/${staging.id}/backups`, {
      method: "POST",
      headers,
      body: "{}",
    });
    expect(taken.status).toBe(201);
    await eventually(
      async () => {
        const list = await remote<{ status: string }[]>(`/v1/databases/${staging.id}/backups`);
        if (!list.data.some((b) => b.status === "completed")) throw new Error("no completed backup yet");
      },
      { what: "a completed backup of staging" },
    );
    const objects = [
      database("plain"),
      database("copy", cloneOfStaging),
      database("from-backup", { source: { type: "backup", databaseRef: { name: "staging" }, latest: true } }),
      preview("pr-7", "feature/seven"),
    ];
    const names = objects.map((o) => o.metadata.name);
    recorder.setPhase("first");
    await apply(...objects);
    const first = new Map<string, Status>();
    for (const n of names) first.set(n, await ready(n));
    for (const n of names.slice(1)) expect(await items(n)).toEqual([{ name: "mug" }]);

    for (const n of names) await deleteDatabase(n);
    for (const n of names) expect((await remote(`/v1/databases/${first.get(n)!.id}`)).status).toBe(404);
    // Closing the pull request soft-deleted its branch.
    expect(await liveBranches("feature/seven")).toEqual([]);

    recorder.setPhase("second");
    await apply(...objects);
    for (const n of names) {
      const s = await ready(n);
      expect(s.id).not.toBe(first.get(n)!.id);
      expect((await liveDatabases(n)).map((d) => d.id)).toEqual([s.id]);
      expect(await warnings(n)).not.toContain("AdoptionRefused");
    }
    expect(await query("plain", "select 1 as one")).toEqual([{ one: 1 }]);
    for (const n of names.slice(1)) expect(await items(n)).toEqual([{ name: "mug" }]);
    // The reopened pull request: a new live branch, the database on it.
    const reopened = (await statusOf("pr-7"))!;
    expect(reopened.branch!.id).not.toBe(first.get("pr-7")!.branch!.id);
    expect((await liveBranches("feature/seven")).map((b) => b.id)).toEqual([reopened.branch!.id]);

    // No key of the second incarnation is one of the first's: nothing deleted could be replayed.
    const firstKeys = new Set(recorder.sent.filter((k) => k.phase === "first").map((k) => k.key));
    const second = recorder.sent.filter((k) => k.phase === "second");
    expect(second.map((k) => k.route)).toEqual(
      expect.arrayContaining(["POST /v1/databases", "POST /v1/projects/:id/branches"]),
    );
    expect(second.filter((k) => firstKeys.has(k.key))).toEqual([]);
  }, 480_000);

  it("an expired preview applied again is a fresh clone, and its expiry reports no error", async () => {
    recorder.setPhase("");
    await apply(preview("pr-exp", "feature/expiring", { expireAfter: "15s" }));
    const first = await ready("pr-exp");
    await query("staging", "insert into items values ('tee')");
    await gone("pr-exp");
    expect((await remote(`/v1/databases/${first.id}`)).status).toBe(404);
    expect(await liveBranches("feature/expiring")).toEqual([]);
    // The warning ahead of the expiry, and nothing else (no "cannot patch Database …: not found" once it is gone).
    expect((await warnings("pr-exp")).filter((r) => r !== "Expiring")).toEqual([]);

    // The next push applies it again (a new expiry ahead): a new clone, with what staging has now.
    await apply(preview("pr-exp", "feature/expiring", { expireAfter: "72h" }));
    const second = await ready("pr-exp");
    expect(second.id).not.toBe(first.id);
    expect(second.branch!.id).not.toBe(first.branch!.id);
    expect(await items("pr-exp")).toEqual([{ name: "mug" }, { name: "tee" }]);
  }, 240_000);

  for (const point of ["database:after-branch-create", "database:after-create"]) {
    it(`a reopened pull request through a crash at ${point}: one new branch, one new database`, async () => {
      const name = point.endsWith("branch-create") ? "pr-crash-branch" : "pr-crash-db";
      const gitName = `feature/${name}`;
      await apply(preview(name, gitName));
      const first = await ready(name);
      await deleteDatabase(name);
      await operator?.stop();
      operator = undefined;
      const crashing = await crashingOperator(point);
      await apply(preview(name, gitName));
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: `the crash at ${point}` },
      );
      await crashing.operator.stop();
      operator = await stack.startOperator({ apiUrl: recorder.url });
      const s = await ready(name);
      expect(s.id).not.toBe(first.id);
      expect((await liveBranches(gitName)).map((b) => b.id)).toEqual([s.branch!.id]);
      expect(s.branch!.id).not.toBe(first.branch!.id);
      expect((await liveDatabases(name)).map((d) => d.id)).toEqual([s.id]);
      expect(await items(name)).toEqual([{ name: "mug" }, { name: "tee" }]);
    }, 240_000);
  }

  it("a Project and a Connection applied again through a crash right after their create: one new remote object each", async () => {
    const solo = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Project",
      metadata: { name: "solo", namespace: stack.namespace },
      spec: { region: "us-east-1", deletionPolicy: "Delete" },
    };
    const reader = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "Connection",
      metadata: { name: "reader", namespace: stack.namespace },
      spec: { databaseRef: { name: "staging" } },
    };
    const idOf = async (plural: string, kind: string, name: string) =>
      eventually(
        async () => {
          const s = (await stack.kube.get<KubeObject>({ ...DatabaseType, plural, kind }, stack.namespace, name))?.[
            "status"
          ] as { id?: string; conditions?: Condition[] } | undefined;
          if (s?.conditions?.find((c) => c.type === "Ready")?.status !== "True") throw new Error(`${name} not ready`);
          return s.id!;
        },
        { what: `${kind} ${name} Ready`, timeoutMs: 120_000 },
      );
    const stagingId = (await statusOf("staging"))!.id!;
    const readerConnections = async () =>
      (await remote<{ connections: { id: string; name: string }[] }>(`/v1/databases/${stagingId}`)).data.connections
        .filter((c) => c.name === `k8s-e2e-connection-${stack.namespace}.reader`)
        .map((c) => c.id);
    const projects = async () =>
      (
        await remote<{ id: string }[]>(
          `/v1/projects?logicalId=${encodeURIComponent(`k8s:e2e:${stack.namespace}/solo`)}`,
        )
      ).data.map((p) => p.id);

    await apply(solo, reader);
    const firstProject = await idOf("projects", "Project", "solo");
    const firstReader = await idOf("connections", "Connection", "reader");
    await stack.kubectl([
      "delete",
      "projects.mds.dev/solo",
      "connections.mds.dev/reader",
      "--wait=true",
      "--timeout=90s",
    ]);
    expect(await projects()).toEqual([]);
    expect(await readerConnections()).toEqual([]);

    for (const [point, obj] of [
      ["project:after-create", solo],
      ["connection:after-create", reader],
    ] as const) {
      await operator?.stop();
      operator = undefined;
      const crashing = await crashingOperator(point);
      await apply(obj);
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: `the crash at ${point}` },
      );
      await crashing.operator.stop();
      operator = await stack.startOperator({ apiUrl: recorder.url });
    }
    const project = await idOf("projects", "Project", "solo");
    expect(project).not.toBe(firstProject);
    expect(await projects()).toEqual([project]);
    const connection = await idOf("connections", "Connection", "reader");
    expect(connection).not.toBe(firstReader);
    // The mint whose answer the crash lost is revoked (found by its name): one live login of this Connection.
    await eventually(async () => expect(await readerConnections()).toEqual([connection]), {
      what: "one live connection of reader",
    });
    expect(await query("reader", "select name from items order by name")).toEqual([{ name: "mug" }, { name: "tee" }]);
  }, 240_000);

  it("two Databases of one pull request racing end on one branch; a clone waiting for its source creates no branch", async () => {
    await apply(preview("pr-9-api", "feature/nine"), preview("pr-9-web", "feature/nine"));
    const [api, web] = [await ready("pr-9-api"), await ready("pr-9-web")];
    expect(api.branch!.id).toBe(web.branch!.id);
    expect((await liveBranches("feature/nine")).map((b) => b.id)).toEqual([api.branch!.id]);

    await apply(
      database("pr-10", {
        branch: { gitName: "feature/ten" },
        source: { type: "database", databaseRef: { name: "nope" } },
      }),
    );
    await eventually(
      async () => {
        const c = await condition("pr-10", "Ready");
        if (c?.reason !== "SourceNotReady") throw new Error(`pr-10: ${JSON.stringify(c)}`);
      },
      { what: "pr-10 SourceNotReady" },
    );
    expect(await liveBranches("feature/ten")).toEqual([]);
    expect(await liveDatabases("pr-10")).toEqual([]);
  }, 240_000);
});
