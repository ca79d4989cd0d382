import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { BackupScheduleType } from "../../src/resources/backup-schedule/schema.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "./helpers.ts";

// A BackupSchedule every minute with keep: 1, against both counterparts. Our service: one DatabaseBackup per slot
// (an operator restarted within the slot creates no second one), each backup taken once, and at the next slot the
// older backup is deleted at the service with its DatabaseBackup. The public-API emulator: Stalled/NotSupported,
// no DatabaseBackup, not one backup request (create or delete) from the operator.

let stack: Stack;
let metrics: Registry;
const pollIntervals = { fastMs: 200, slowMs: 3_000 };

type Status = {
  phase?: string;
  backupId?: string;
  lastScheduleTime?: string;
  nextScheduleTime?: string;
  kept?: number;
  conditions?: { type: string; status: string; reason: string; message: string }[];
};

async function backupIds(dbId: string): Promise<string[]> {
  const res = await fetch(`${stack.service.url}/v1/databases/${dbId}/backups`, {
    headers: { authorization: `Bearer ${stack.service.token}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { id: string }[] }).data.map((b) => b.id);
}
const children = async () =>
  (await stack.kube.list<KubeObject>(DatabaseBackupType, { namespace: stack.namespace })).items.filter(
    (b) => b.metadata.labels?.["mds.dev/backup-schedule"] === "every-minute",
  );
const scheduleStatus = async () =>
  (await stack.kube.get<KubeObject>(BackupScheduleType, stack.namespace, "every-minute"))?.["status"] as
    Status | undefined;

describe.each(counterparts)("BackupSchedule against %s", (counterpart) => {
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
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "BackupSchedule",
        metadata: { name: "every-minute", namespace: stack.namespace },
        spec: { databaseRef: { name: "orders" }, schedule: "* * * * *", keep: 1 },
      }),
    );
  }, 120_000);

  afterAll(async () => {
    await operator?.stop();
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  if (counterpart === "service") {
    it("takes one backup per slot, none twice through a restart, and keeps only the newest", async () => {
      const before = await backupIds(dbId);
      const first = await eventually(
        async () => {
          const [child, ...more] = await children();
          expect(more).toEqual([]);
          const s = child?.["status"] as Status | undefined;
          if (s?.phase !== "Succeeded") throw new Error(`first slot: ${JSON.stringify(s)}`);
          return { name: child!.metadata.name, backupId: s.backupId! };
        },
        { what: "the first slot's backup", timeoutMs: 90_000 },
      );
      expect((await backupIds(dbId)).filter((id) => !before.includes(id))).toEqual([first.backupId]);
      expect(await scheduleStatus()).toMatchObject({ lastBackup: first.name, kept: 1 });
      // A restart within the slot: the fresh operator finds the slot's DatabaseBackup and takes nothing new.
      await operator?.stop();
      operator = await stack.startOperator({ metrics, pollIntervals });
      const second = await eventually(
        async () => {
          const list = await children();
          const newer = list.find((c) => c.metadata.name !== first.name);
          const s = newer?.["status"] as Status | undefined;
          if (s?.phase !== "Succeeded" || list.length !== 1) throw new Error(`second slot: ${list.length} children`);
          return { name: newer!.metadata.name, backupId: s.backupId! };
        },
        { what: "the next slot's backup, the first pruned", timeoutMs: 150_000 },
      );
      expect(second.name).not.toBe(first.name);
      const now = await backupIds(dbId);
      expect(now).toContain(second.backupId);
      expect(now).not.toContain(first.backupId);
      expect(now.filter((id) => !before.includes(id))).toEqual([second.backupId]);
      const s = (await scheduleStatus())!;
      expect(s.conditions?.find((c) => c.type === "Ready")).toMatchObject({ status: "True", reason: "Scheduled" });
      expect(Date.parse(s.nextScheduleTime!)).toBeGreaterThan(Date.parse(s.lastScheduleTime!));
    }, 260_000);
  } else {
    it("is Stalled with reason NotSupported, creates no DatabaseBackup and sends no backup request", async () => {
      const before = await backupIds(dbId);
      const stalled = await eventually(
        async () => {
          const c = (await scheduleStatus())?.conditions?.find((x) => x.type === "Stalled");
          if (c?.status !== "True") throw new Error(`not stalled: ${JSON.stringify(c)}`);
          return c;
        },
        { what: "Stalled", timeoutMs: 30_000 },
      );
      expect(stalled).toMatchObject({ reason: "NotSupported" });
      expect(stalled.message).toMatch(/does not take or delete backups on request/);
      // Past a slot, through a restart: still nothing.
      await new Promise((r) => setTimeout(r, 61_000));
      await operator?.stop();
      // The registry outlives the operator: the new one has looked at the schedule once the count grows.
      const reconciles = async () => {
        const m = (await metrics.getMetricsAsJSON()).find((x) => x.name === "controller_runtime_reconcile_total");
        return (m?.values ?? [])
          .filter((v) => v.labels["controller"] === "backupschedule")
          .reduce((a, v) => a + v.value, 0);
      };
      const reconciledBefore = await reconciles();
      operator = await stack.startOperator({ metrics, pollIntervals });
      await eventually(async () => expect(await reconciles()).toBeGreaterThan(reconciledBefore), {
        what: "the restarted operator reconciled the schedule",
      });
      expect(await children()).toEqual([]);
      expect(await backupIds(dbId)).toEqual(before);
      const calls = await metrics.getSingleMetricAsString("mds_client_requests_total");
      expect(calls).not.toMatch(/operation="createBackup"/);
      expect(calls).not.toMatch(/operation="deleteBackup"/);
    }, 120_000);
  }
});
