import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// A DatabaseBackup takes exactly one backup: plainly, through a crash before its POST and through a crash after it
// (the restarted operator re-sends the same Idempotency-Key and our service replays it). Against the public-API
// emulator (no backup endpoint, no replay announced) it is Failed/NotSupported with Stalled=True, and no backup
// request ever leaves the operator: the crash points, which sit around that request, are never reached.

let stack: Stack;
// Every operator of a file reports its client calls here (mds_client_requests_total by operation).
let metrics: Registry;
// Resyncs every 3 s: the Database's status.latestBackup is read at its resyncs.
const pollIntervals = { fastMs: 200, slowMs: 3_000 };

class SimulatedCrash extends Error {}

/** An operator that "dies" at the named point: it throws there and never writes again, as a killed process. */
async function startCrashingOperator(point: string): Promise<{ operator: Operator; crashed: () => boolean }> {
  let dead = false;
  const operator = await stack.startOperator({
    metrics,
    pollIntervals,
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

/** The database's backups at our service itself (behind the emulator too): the truth about what was taken. */
async function backupIds(dbId: string): Promise<string[]> {
  const res = await fetch(`${stack.service.url}/v1/databases/${dbId}/backups`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { id: string }[] }).data.map((b) => b.id);
}

type BackupStatus = {
  phase?: string;
  reason?: string;
  backupId?: string;
  sizeBytes?: number;
  conditions?: { type: string; status: string; reason: string; message: string }[];
};
const backupStatus = async (name: string) =>
  (await stack.kube.get<KubeObject>(DatabaseBackupType, stack.namespace, name))?.["status"] as BackupStatus | undefined;

const backup = (name: string) => ({
  apiVersion: "mds.dev/v1alpha1",
  kind: "DatabaseBackup",
  metadata: { name, namespace: stack.namespace },
  spec: { databaseRef: { name: "orders" } },
});

async function finalPhase(name: string): Promise<BackupStatus> {
  return eventually(
    async () => {
      const s = await backupStatus(name);
      if (s?.phase !== "Succeeded" && s?.phase !== "Failed") throw new Error(`not final: ${JSON.stringify(s)}`);
      return s;
    },
    { what: `${name} final`, timeoutMs: 60_000 },
  );
}

describe.each(counterparts)("DatabaseBackup against %s", (counterpart) => {
  let dbId: string;
  let operator: Operator | undefined;

  beforeAll(async () => {
    stack = await startStack({ api: counterpart });
    metrics = new Registry();
    operator = await stack.startOperator({ metrics, pollIntervals });
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "shop", namespace: stack.namespace },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "orders", namespace: stack.namespace },
          spec: { projectRef: { name: "shop" } },
        },
      ),
    );
    dbId = await eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "orders"))?.["status"] as
          { id?: string; conditions?: { type: string; status: string }[] } | undefined;
        if (s?.conditions?.find((c) => c.type === "Ready")?.status !== "True" || s.id === undefined)
          throw new Error("not ready");
        return s.id;
      },
      { what: "orders Ready" },
    );
  }, 120_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  /** Applies a DatabaseBackup under an operator that dies at `point`, then lets a fresh operator finish it. */
  async function throughCrash(name: string, point: string): Promise<{ status: BackupStatus; crashed: boolean }> {
    await operator?.stop();
    const crashing = await startCrashingOperator(point);
    await stack.kubectl(["apply", "-f", "-"], manifests(backup(name)));
    if (counterpart === "service") {
      await eventually(
        () => {
          if (!crashing.crashed()) throw new Error("not crashed yet");
        },
        { what: "the crash" },
      );
    } else {
      await finalPhase(name);
    }
    await crashing.operator.stop();
    operator = await stack.startOperator({ metrics, pollIntervals });
    return { status: await finalPhase(name), crashed: crashing.crashed() };
  }

  if (counterpart === "service") {
    it("takes one backup and follows it to Succeeded with its id and size", async () => {
      const before = await backupIds(dbId);
      await stack.kubectl(["apply", "-f", "-"], manifests(backup("plain")));
      const s = await finalPhase("plain");
      expect(s).toMatchObject({ phase: "Succeeded" });
      expect(s.sizeBytes).toBeGreaterThan(0);
      expect((await backupIds(dbId)).filter((id) => !before.includes(id))).toEqual([s.backupId]);
      await stack.kubectl(["wait", "--for=condition=Ready", "databasebackup/plain", "--timeout=5s"]);
    });

    for (const point of ["backup:before-post", "backup:after-post"]) {
      it(`takes exactly one backup through a crash at ${point}`, async () => {
        const before = await backupIds(dbId);
        const name = point.replace("backup:", "crash-");
        const { status, crashed } = await throughCrash(name, point);
        expect(crashed).toBe(true);
        expect(status.phase).toBe("Succeeded");
        expect((await backupIds(dbId)).filter((id) => !before.includes(id))).toEqual([status.backupId]);
      });
    }
  } else {
    it("is Failed with reason NotSupported and Stalled, and sends no backup request, even through restarts", async () => {
      for (const point of ["backup:before-post", "backup:after-post"]) {
        const before = await backupIds(dbId);
        const name = point.replace("backup:", "crash-");
        const { status, crashed } = await throughCrash(name, point);
        expect(crashed).toBe(false);
        expect(status).toMatchObject({ phase: "Failed", reason: "NotSupported" });
        expect(status.backupId).toBeUndefined();
        const stalled = status.conditions?.find((c) => c.type === "Stalled");
        expect(stalled).toMatchObject({ status: "True", reason: "NotSupported" });
        expect(stalled?.message).toMatch(/does not take backups on request/);
        expect(await backupIds(dbId)).toEqual(before);
      }
      // No retry storm: not one backup request left any of the operators (their other calls are counted).
      const calls = await metrics.getSingleMetricAsString("mds_client_requests_total");
      expect(calls).toMatch(/operation="getDatabase"/);
      expect(calls).not.toMatch(/operation="createBackup"/);
    });
  }

  it("shows the newest completed backup in the Database's status.latestBackup and its age in the metric", async () => {
    // The newest backup, whoever took it: against the public API the provider (here: straight at our service).
    let newest: string;
    if (counterpart === "service") {
      await stack.kubectl(["apply", "-f", "-"], manifests(backup("latest")));
      newest = (await finalPhase("latest")).backupId!;
    } else {
      const taken = await fetch(`${stack.service.url}/v1/databases/${dbId}/backups`, {
        method: "POST",
        headers: { authorization: `Bearer ${stack.service.token}`, "content-type": "application/json" },
        body: "{}",
      });
      newest = ((await taken.json()) as { data: { id: string } }).data.id;
    }
    // One the operator took shows at the next resync; one it did not, after the list's one-minute refresh.
    const latest = await eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "orders"))?.["status"] as
          { latestBackup?: { id: string; time: string; sizeBytes?: number } } | undefined;
        if (s?.latestBackup?.id !== newest) throw new Error(`latestBackup ${JSON.stringify(s?.latestBackup)}`);
        return s.latestBackup;
      },
      { what: "status.latestBackup", timeoutMs: 120_000 },
    );
    expect(Date.now() - Date.parse(latest.time)).toBeLessThan(120_000);
    if (counterpart === "service") expect(latest.sizeBytes).toBeGreaterThan(0);
    const age = (await metrics.getSingleMetric("mds_database_backup_age_seconds")!.get()).values.find(
      (v) => v.labels["database"] === "orders" && v.labels["database_namespace"] === stack.namespace,
    );
    expect(age?.value).toBeGreaterThanOrEqual(0);
    expect(age?.value).toBeLessThan(120);
  }, 150_000);

  if (counterpart === "service") {
    it("a DatabaseBackup that succeeds updates its Database's status.latestBackup at once, not at the next resync", async () => {
      await operator?.stop();
      // Resyncs 10 minutes apart: only the backup's success can bring the Database's status up to date in time.
      operator = await stack.startOperator({ metrics, pollIntervals: { fastMs: 200, slowMs: 600_000 } });
      await stack.kubectl(["apply", "-f", "-"], manifests(backup("woken")));
      const taken = await finalPhase("woken");
      expect(taken.phase).toBe("Succeeded");
      await eventually(
        async () => {
          const s = (await stack.kube.get<KubeObject>(DatabaseType, stack.namespace, "orders"))?.["status"] as
            { latestBackup?: { id: string } } | undefined;
          if (s?.latestBackup?.id !== taken.backupId)
            throw new Error(`latestBackup ${JSON.stringify(s?.latestBackup)}`);
        },
        { what: "status.latestBackup is the backup just taken", timeoutMs: 20_000 },
      );
    }, 90_000);
  }
});
