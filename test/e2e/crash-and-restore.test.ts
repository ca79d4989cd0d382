import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretType, type KubeObject, type Secret } from "../../src/kube/types.ts";
import { decodeData } from "../../src/operator/secret/render.ts";
import { connectionNameOf } from "../../src/operator/identity.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// Creation without duplicates or lost credentials through a crash between the POST and the Secret write, and a
// restore that runs exactly once: through a crash after its POST, a deleted and re-applied DatabaseRestore
// (Skipped), and a re-created target Database (the ledger on its Secret).

let stack: Stack;

class SimulatedCrash extends Error {}

/** An operator that "dies" at the named point: it throws there and never writes again, as a killed process. */
async function startCrashingOperator(point: string): Promise<{ operator: Operator; crashed: () => boolean }> {
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

const api = async (method: string, path: string, body?: object) => {
  const res = await fetch(`${stack.service.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as { data: unknown } | undefined };
};

async function status(type: typeof DatabaseType, name: string): Promise<Record<string, unknown> | undefined> {
  return (await stack.kube.get<KubeObject>(type, stack.namespace, name))?.["status"] as
    Record<string, unknown> | undefined;
}

async function waitReady(name: string) {
  return eventually(
    async () => {
      const s = await status(DatabaseType, name);
      const ready = (s?.["conditions"] as { type: string; status: string }[] | undefined)?.find(
        (c) => c.type === "Ready",
      );
      if (ready?.status !== "True") throw new Error(`not ready: ${JSON.stringify(s)}`);
      return s as { id: string; connection: { id: string }; secretName: string };
    },
    { what: `${name} Ready` },
  );
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

async function secretUrl(name: string) {
  const s = await stack.kube.get<Secret>(SecretType, stack.namespace, name);
  if (s === undefined) throw new Error(`Secret ${name} missing`);
  return decodeData(s)["DATABASE_URL"]!;
}

const objects = {
  project: () => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Project",
    metadata: { name: "crashy", namespace: stack.namespace },
    spec: { region: "us-east-1" },
  }),
  database: (name: string) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name, namespace: stack.namespace },
    spec: { projectRef: { name: "crashy" } },
  }),
  restore: (name: string) => ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "DatabaseRestore",
    metadata: { name, namespace: stack.namespace },
    spec: {
      target: { databaseRef: { name: "inventory" } },
      source: { databaseRef: { name: "inventory" }, latest: true },
      idempotencyKey: "incident-42",
    },
  }),
};

async function expireReplays() {
  const client = new pg.Client({ connectionString: stack.service.controlUrl });
  await client.connect();
  try {
    await client.query("update idempotency set expires_at = now() - interval '1 second'");
  } finally {
    await client.end();
  }
}

// Against both counterparts: our service replays a lost creation's answer (Idempotency-Key); the public API does not,
// so there the operator mints a new connection and revokes the lost one, and resolves a restore by observing it.
describe.each(counterparts)("against %s", (counterpart) => {
  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
  }, 120_000);

  afterAll(async () => {
    // Crashes, replays, mints, revokes and restores: none may leave a secret in a log, event or status.
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  describe("crash safety", () => {
    it("a crash between the create POST and the Secret write yields one database and working credentials", async () => {
      const first = await startCrashingOperator("database:after-create");
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.project(), objects.database("ledger")));
      await eventually(
        () => {
          if (!first.crashed()) throw new Error("not crashed yet");
        },
        { what: "the crash" },
      );
      await first.operator.stop();
      expect(await stack.kube.get(SecretType, stack.namespace, "ledger")).toBeUndefined();

      const second = await stack.startOperator();
      const s = await waitReady("ledger");
      const list = await api(
        "GET",
        `/v1/databases?logicalId=${encodeURIComponent(`k8s:e2e:${stack.namespace}/ledger`)}`,
      );
      expect((list.body?.data as unknown[]).length).toBe(1);
      expect(await query<{ one: number }>(await secretUrl("ledger"), "select 1 as one")).toEqual([{ one: 1 }]);
      const db = (await api("GET", `/v1/databases/${s.id}`)).body?.data as {
        defaultConnectionId: string;
        connections: { id: string; name: string }[];
      };
      if (counterpart === "service") {
        // Replayed within the Idempotency-Key window: the original connection, nothing revoked, nothing minted.
        expect(s.connection.id).toBe(db.defaultConnectionId);
        expect(db.connections).toHaveLength(1);
      } else {
        // No replay there: the lost connection (its password only in the lost answer) is revoked, a minted one remains.
        expect(db.connections.map((c) => [c.id, c.name])).toEqual([
          [s.connection.id, connectionNameOf("e2e", "Database", stack.namespace, "ledger")],
        ]);
      }
      await second.stop();
    });
  });

  describe("crash safety past the replay window", () => {
    it("adopts the database, mints a new connection for the Secret and revokes the lost one", async () => {
      const first = await startCrashingOperator("database:after-create");
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.project(), objects.database("ledger-late")));
      await eventually(
        () => {
          if (!first.crashed()) throw new Error("not crashed yet");
        },
        { what: "the crash" },
      );
      await first.operator.stop();
      await expireReplays();

      const second = await stack.startOperator();
      const s = await waitReady("ledger-late");
      const list = await api(
        "GET",
        `/v1/databases?logicalId=${encodeURIComponent(`k8s:e2e:${stack.namespace}/ledger-late`)}`,
      );
      expect((list.body?.data as unknown[]).length).toBe(1);
      // The original connection (its password only ever in the lost response) is revoked; the minted one remains.
      const db = (await api("GET", `/v1/databases/${s.id}`)).body?.data as {
        connections: { id: string; name: string }[];
      };
      expect(db.connections.map((c) => [c.id, c.name])).toEqual([
        [s.connection.id, connectionNameOf("e2e", "Database", stack.namespace, "ledger-late")],
      ]);
      expect(await query<{ one: number }>(await secretUrl("ledger-late"), "select 1 as one")).toEqual([{ one: 1 }]);
      await second.stop();
    });
  });

  describe("restore exactly once", () => {
    let operator: Operator;
    let url: string;
    let dbId: string;

    beforeAll(async () => {
      operator = await stack.startOperator();
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.project(), objects.database("inventory")));
      dbId = (await waitReady("inventory")).id;
      url = await secretUrl("inventory");
      await query(url, "create table items (n int); insert into items values (1)");
      const backup = await api("POST", `/v1/databases/${dbId}/backups`);
      expect(backup.status).toBe(201);
      await eventually(
        async () => {
          const list = (await api("GET", `/v1/databases/${dbId}/backups`)).body as unknown as {
            data: { status: string }[];
          };
          if (list.data[0]?.status !== "completed") throw new Error("backup not completed");
        },
        { what: "backup" },
      );
      await query(url, "insert into items values (2)");
    });

    const restoreJobs = async () => {
      const client = new pg.Client({ connectionString: stack.service.controlUrl });
      await client.connect();
      try {
        return Number(
          (await client.query("select count(*) as n from jobs where kind = 'restore' and target_id = $1", [dbId]))
            .rows[0].n,
        );
      } finally {
        await client.end();
      }
    };

    const phaseOf = async (name: string) => (await status(DatabaseRestoreType as typeof DatabaseType, name))?.["phase"];

    it("survives a crash right after the restore POST and restores once", async () => {
      await operator.stop();
      const crashing = await startCrashingOperator("restore:after-post");
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.restore("rollback")));
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: "the crash" },
      );
      await crashing.operator.stop();
      operator = await stack.startOperator();
      await eventually(
        async () => {
          const p = await phaseOf("rollback");
          if (p !== "Succeeded") throw new Error(`phase ${String(p)}`);
        },
        { what: "Succeeded" },
      );
      expect(await query<{ n: number }>(url, "select n from items order by n")).toEqual([{ n: 1 }]);
      expect(await restoreJobs()).toBe(1);
      const db = await status(DatabaseType, "inventory");
      expect((db?.["restoreLedger"] as { key: string; phase: string }[]).map((e) => [e.key, e.phase])).toEqual([
        ["incident-42", "Succeeded"],
      ]);
    });

    it("is OutcomeUnknown, never a second request, when a crash before the POST is found after the replay window", async () => {
      await operator.stop();
      const crashing = await startCrashingOperator("restore:before-post");
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests({
          ...objects.restore("unknowable"),
          spec: { ...objects.restore("unknowable").spec, idempotencyKey: "incident-43" },
        }),
      );
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: "the crash" },
      );
      await crashing.operator.stop();
      operator = await stack.startOperator({ kindSettings: { DatabaseRestore: { replayWindowMs: 0 } } });
      await eventually(
        async () => {
          const s = await status(DatabaseRestoreType as typeof DatabaseType, "unknowable");
          if (s?.["phase"] !== "Failed" || s["reason"] !== "OutcomeUnknown") throw new Error(JSON.stringify(s));
        },
        { what: "OutcomeUnknown" },
      );
      expect(await restoreJobs()).toBe(1);
      await stack.kubectl(["delete", "mdsrestore", "unknowable"]);
    });

    it("a deleted and re-applied DatabaseRestore is Skipped", async () => {
      await query(url, "insert into items values (3)");
      await stack.kubectl(["delete", "mdsrestore", "rollback"]);
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.restore("rollback")));
      await eventually(
        async () => {
          if ((await phaseOf("rollback")) !== "Skipped") throw new Error("not skipped");
        },
        { what: "Skipped" },
      );
      expect(await query<{ n: number }>(url, "select n from items order by n")).toEqual([{ n: 1 }, { n: 3 }]);
      expect(await restoreJobs()).toBe(1);
    });

    it("a re-created target Database still remembers the restore (ledger on its Secret)", async () => {
      await stack.kubectl(["delete", "mdsdb", "inventory", "--wait=true"]);
      await stack.kubectl(["delete", "mdsrestore", "rollback"]);
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.database("inventory")));
      const s = await waitReady("inventory");
      expect(s.id).toBe(dbId);
      await stack.kubectl(["apply", "-f", "-"], manifests(objects.restore("rollback-again")));
      await eventually(
        async () => {
          if ((await phaseOf("rollback-again")) !== "Skipped") throw new Error("not skipped");
        },
        { what: "Skipped" },
      );
      expect(await restoreJobs()).toBe(1);
      expect(await query<{ n: number }>(url, "select n from items order by n")).toEqual([{ n: 1 }, { n: 3 }]);
    });

    it("a Database created from the latest backup of another starts with that backup's data", async () => {
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests({
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "inventory-copy", namespace: stack.namespace },
          spec: {
            projectRef: { name: "crashy" },
            source: { type: "backup", databaseRef: { name: "inventory" }, latest: true },
          },
        }),
      );
      await waitReady("inventory-copy");
      expect(await query<{ n: number }>(await secretUrl("inventory-copy"), "select n from items order by n")).toEqual([
        { n: 1 },
      ]);
    });
  });
});
