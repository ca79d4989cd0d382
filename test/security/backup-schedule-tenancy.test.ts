import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import type { Operator } from "../../src/operator/index.ts";
import { BackupScheduleType } from "../../src/resources/backup-schedule/schema.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { DatabaseType } from "../../src/resources/types.ts";
import { eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// A BackupSchedule's retention deletes backups at the service. Team B (namespace b, its own token) tries to make the
// operator delete team A's backups (the operator's namespace, served by the operator's token) with everything B can
// write: DatabaseBackups that its schedule "owns" (an ownerReference with its uid, the schedule's label) whose status
// names A's database and A's backup, or B's database and A's backup; and a DatabaseBackup of its own, labelled as
// the schedule's but not owned by it. Retention prunes only what the schedule owns, deletes at the service only
// through the schedule's own Database (DELETE /v1/databases/{B's database}/backups/{id}) with B's token, and the
// service answers 404 for any backup of another database or workspace: A keeps every backup.

type Status = { phase?: string; conditions?: { type: string; status: string; reason: string }[] };

describe("team B cannot make a BackupSchedule delete team A's backups", () => {
  let stack: Stack;
  let operator: Operator | undefined;
  let tokenA = "";
  let tokenB = "";
  let dbA = "";
  let dbB = "";
  const ns = (team: "a" | "b") => (team === "a" ? stack.namespace : stack.namespaceOf(team));

  const backupsOf = async (db: string, token: string) => {
    const res = await fetch(`${stack.service.url}/v1/databases/${db}/backups`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { id: string; status: string }[] }).data;
  };
  const takeBackup = async (db: string, token: string) => {
    const res = await fetch(`${stack.service.url}/v1/databases/${db}/backups`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as { data: { id: string } }).data.id;
    await eventually(
      async () => {
        if ((await backupsOf(db, token)).find((b) => b.id === id)?.status !== "completed") throw new Error("running");
      },
      { what: `backup ${id} completed`, timeoutMs: 30_000 },
    );
    return id;
  };
  const readyId = (namespace: string, name: string) =>
    eventually(
      async () => {
        const s = (await stack.kube.get<KubeObject>(DatabaseType, namespace, name))?.["status"] as
          (Status & { id?: string }) | undefined;
        if (s?.conditions?.find((c) => c.type === "Ready")?.status !== "True" || s.id === undefined)
          throw new Error(`${namespace}/${name} not ready`);
        return s.id;
      },
      { what: `${namespace}/${name} Ready`, timeoutMs: 60_000 },
    );

  beforeAll(async () => {
    stack = await startStack({ api: "service", namespaces: ["b"] });
    tokenA = stack.service.token;
    tokenB = await stack.service.createToken("schedule-team-b");
    await stack.kubectl(
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "mds-credentials", namespace: ns("b") },
        stringData: { token: tokenB },
      }),
    );
    operator = await stack.startOperator();
    const teamObjects = (team: "a" | "b") => [
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Project",
        metadata: { name: "app", namespace: ns(team) },
        spec: { region: "us-east-1" },
      },
      {
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "orders", namespace: ns(team) },
        spec: { projectRef: { name: "app" } },
      },
    ];
    await stack.kubectl(["apply", "-f", "-"], manifests(...teamObjects("a"), ...teamObjects("b")));
    dbA = await readyId(ns("a"), "orders");
    dbB = await readyId(ns("b"), "orders");
  }, 180_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("forged owned DatabaseBackups naming A's backups are not the schedule's: kept, never deleted at the service", async () => {
    const a1 = await takeBackup(dbA, tokenA);
    const a2 = await takeBackup(dbA, tokenA);
    const b1 = await takeBackup(dbB, tokenB);
    const before = (await backupsOf(dbA, tokenA)).map((b) => b.id).sort();
    // Written while no operator runs, so the forged statuses are the first thing it sees.
    await operator?.stop();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "BackupSchedule",
        metadata: { name: "yearly", namespace: ns("b") },
        // No slot comes during the test: only retention runs.
        spec: { databaseRef: { name: "orders" }, schedule: "0 0 1 1 *", keep: 1 },
      }),
    );
    const schedule = (await stack.kube.get<KubeObject>(BackupScheduleType, ns("b"), "yearly"))!;
    const owner = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "BackupSchedule",
      name: "yearly",
      uid: schedule.metadata.uid!,
      controller: true,
    };
    const forged = (name: string, at: string, owned: boolean) => ({
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseBackup",
      metadata: {
        name,
        namespace: ns("b"),
        labels: { "mds.dev/backup-schedule": "yearly" },
        annotations: { "mds.dev/scheduled-at": at },
        ...(owned ? { ownerReferences: [owner] } : {}),
      },
      // A Database that never exists: the DatabaseBackup's own loop waits and takes nothing.
      spec: { databaseRef: { name: "nothing-here" } },
    });
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        forged("newest", "2026-01-03T00:00:00Z", true),
        forged("names-a", "2026-01-02T00:00:00Z", true),
        forged("a-under-b", "2026-01-01T00:00:00Z", true),
        forged("labelled-only", "2025-01-01T00:00:00Z", false),
      ),
    );
    const forge = (name: string, status: object) =>
      stack.kubectl([
        "patch",
        "databasebackup",
        name,
        "-n",
        ns("b"),
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify({ status: { phase: "Succeeded", ...status } }),
      ]);
    await forge("newest", { databaseId: dbB, backupId: b1 });
    await forge("names-a", { databaseId: dbA, backupId: a1 });
    await forge("a-under-b", { databaseId: dbB, backupId: a2 });
    await forge("labelled-only", { databaseId: dbB, backupId: b1 });
    operator = await stack.startOperator();

    // None of them is what the schedule creates for a slot (its name and idempotencyKey, derived from the schedule's
    // name, uid and the slot), whatever their ownerReference says: retention (keep: 1) counts none of them as its own
    // and deletes nothing, neither a resource nor a backup. The schedule's reconcile, which runs retention, has run
    // once it reports Ready.
    await eventually(
      async () => {
        const status = (await stack.kube.get<KubeObject>(BackupScheduleType, ns("b"), "yearly"))?.["status"] as Status;
        expect(status?.conditions?.find((c) => c.type === "Ready")).toMatchObject({ status: "True" });
      },
      { what: "the schedule reconciled", timeoutMs: 30_000 },
    );
    const left = (await stack.kube.list<KubeObject>(DatabaseBackupType, { namespace: ns("b") })).items
      .map((b) => b.metadata.name)
      .sort();
    expect(left).toEqual(["a-under-b", "labelled-only", "names-a", "newest"]);
    expect((await backupsOf(dbA, tokenA)).map((b) => b.id).sort()).toEqual(before);
    expect((await backupsOf(dbB, tokenB)).map((b) => b.id)).toContain(b1);
    const status = (await stack.kube.get<KubeObject>(BackupScheduleType, ns("b"), "yearly"))?.["status"] as Status;
    expect(status.conditions?.find((c) => c.type === "Ready")).toMatchObject({ status: "True", reason: "Scheduled" });
  });
});
