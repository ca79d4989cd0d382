import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../src/kube/types.ts";
import { BackupScheduleType } from "../../src/resources/backup-schedule/schema.ts";
import { slotBackupName } from "../../src/resources/backup-schedule/operation.ts";
import { DatabaseBackupType } from "../../src/resources/database-backup/schema.ts";
import { ConnectionType, DatabaseRestoreType, DatabaseType } from "../../src/resources/types.ts";
import { counterparts, eventually, manifests, startStack, type Stack } from "../e2e/helpers.ts";

// Status is never proof of identity. Team A (the operator's namespace) and team B share the operator's token, as
// --credentials-fallback-namespaces "*" (what `mds dev` once set) lends it: B's token sees A's database. B writes A's
// database id into the status of a Database of its own ("forged"), whose own loop refuses it. Nothing that refers to
// "forged" may then act on A's database: a Connection, a clone, a DatabaseBackup, a DatabaseRestore, a BackupSchedule
// and its retention. And retention deletes only backups its own DatabaseBackups took: not through children forged
// with its ownerReference, across namespaces or within one. Each attack succeeded before the operator kept its own
// record of the ids its loops accepted (src/operator/accepted.ts) and sealed its backups' records.

type Condition = { type: string; status: string; reason: string; message: string };
type Status = { id?: string; phase?: string; backupId?: string; conditions?: Condition[] };

describe.each(counterparts)("nothing acts through a Database whose status.id is forged, against %s", (api) => {
  let stack: Stack;
  let token = "";
  let dbA = "";
  let projectA = "";
  const nsA = () => stack.namespace;
  const nsB = () => stack.namespaceOf("b");

  const statusOf = async (type: typeof DatabaseType, namespace: string, name: string) =>
    (await stack.kube.get<KubeObject>(type, namespace, name))?.["status"] as Status | undefined;
  const until = <T>(what: string, read: () => Promise<T | undefined>) =>
    eventually(
      async () => {
        const value = await read();
        if (value === undefined) throw new Error(`not yet: ${what}`);
        return value;
      },
      { what, timeoutMs: 60_000 },
    );
  /** Waits until the resource reports `reason` in one of its conditions. */
  const waitsWith = (type: typeof DatabaseType, namespace: string, name: string, reason: string) =>
    until(`${namespace}/${name} reports ${reason}`, async () => {
      const s = await statusOf(type, namespace, name);
      return s?.conditions?.some((c) => c.reason === reason) === true ? s : undefined;
    });
  /** What team A sees at the service (our service: the emulator fronts it). */
  const service = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${stack.service.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    });
    return { status: res.status, body: (await res.json()) as { data: unknown } };
  };
  const connectionsOfA = async () =>
    ((await service(`/v1/databases/${dbA}`)).body.data as { connections: { id: string }[] }).connections
      .map((c) => c.id)
      .sort();
  const backupsOfA = async () =>
    ((await service(`/v1/databases/${dbA}/backups`)).body.data as { id: string }[]).map((b) => b.id).sort();
  const takeBackupOfA = async () => {
    const res = await service(`/v1/databases/${dbA}/backups`, { method: "POST", body: "{}" });
    expect(res.status).toBe(201);
    const id = (res.body.data as { id: string }).id;
    await until(`backup ${id} completed`, async () =>
      ((await service(`/v1/databases/${dbA}/backups`)).body.data as { id: string; status: string }[]).some(
        (b) => b.id === id && b.status === "completed",
      )
        ? true
        : undefined,
    );
    return id;
  };
  const patchStatus = (kind: string, namespace: string, name: string, status: object) =>
    stack.kubectl([
      "patch",
      kind,
      name,
      "-n",
      namespace,
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ status }),
    ]);
  const warningsOf = async (namespace: string, name: string) =>
    (
      JSON.parse(await stack.kubectl(["get", "events", "-n", namespace, "-o", "json"])) as {
        items: { reason: string; message: string; involvedObject: { name: string } }[];
      }
    ).items.filter((e) => e.involvedObject.name === name);

  beforeAll(async () => {
    stack = await startStack({ api, namespaces: ["b"] });
    token = stack.service.token;
    const operatorCredentials = { secretNamespace: stack.namespace, secretName: "mds-credentials", key: "token" };
    await stack.startOperator({ defaultCredentials: { ...operatorCredentials, fallbackNamespaces: "*" } });
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests(
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Project",
          metadata: { name: "app", namespace: nsA() },
          spec: { region: "us-east-1" },
        },
        {
          apiVersion: "mds.dev/v1alpha1",
          kind: "Database",
          metadata: { name: "orders", namespace: nsA() },
          spec: { projectRef: { name: "app" } },
        },
      ),
    );
    const a = await until("A's database Ready", async () => {
      const s = await statusOf(DatabaseType, nsA(), "orders");
      return s?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true ? s : undefined;
    });
    dbA = a.id!;
    projectA = ((await service(`/v1/databases/${dbA}`)).body.data as { project: { id: string } }).project.id;
    // B's Database in A's project (its token sees it), paused while its status is forged, then let go: its own loop
    // refuses the id (AdoptionConflict or AdoptionRefused), so it never manages A's database.
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "forged", namespace: nsB(), annotations: { "mds.dev/paused": "true" } },
        spec: { projectId: projectA },
      }),
    );
    await patchStatus("database", nsB(), "forged", { id: dbA });
    await stack.kubectl(["annotate", "database", "forged", "-n", nsB(), "mds.dev/paused-"]);
    await until("forged refused by its own loop", async () => {
      const s = await statusOf(DatabaseType, nsB(), "forged");
      const stalled = s?.conditions?.find((c) => c.type === "Stalled" && c.status === "True");
      return stalled?.reason === "AdoptionConflict" || stalled?.reason === "AdoptionRefused" ? s : undefined;
    });
  }, 180_000);

  afterAll(async () => {
    const leaks = stack === undefined ? "" : await stack.leaks();
    await stack?.stop();
    expect(leaks).toBe("");
  });

  it("a Connection to it mints nothing on A's database", async () => {
    const before = await connectionsOfA();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Connection",
        metadata: { name: "steal", namespace: nsB() },
        spec: { databaseRef: { name: "forged" } },
      }),
    );
    const s = await waitsWith(ConnectionType, nsB(), "steal", "DatabaseNotAccepted");
    expect(s.id).toBeUndefined();
    expect(await connectionsOfA()).toEqual(before);
    expect(await stack.kube.get(ConnectionType, nsB(), "steal")).toBeDefined();
  });

  it("a clone of it copies nothing of A's database", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "Database",
        metadata: { name: "copy", namespace: nsB() },
        spec: { projectId: projectA, source: { type: "database", databaseRef: { name: "forged" } } },
      }),
    );
    const s = await waitsWith(DatabaseType, nsB(), "copy", "DatabaseNotAccepted");
    expect(s.id).toBeUndefined();
    const all = (await service(`/v1/databases?projectId=${projectA}`)).body.data as { source?: unknown }[];
    expect(all.filter((d) => JSON.stringify(d.source ?? null).includes(dbA))).toEqual([]);
  });

  it("a DatabaseBackup of it takes no backup of A's database", async () => {
    const before = await backupsOfA();
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "DatabaseBackup",
        metadata: { name: "copy-of-a", namespace: nsB() },
        spec: { databaseRef: { name: "forged" } },
      }),
    );
    const s = await waitsWith(DatabaseBackupType, nsB(), "copy-of-a", "DatabaseNotAccepted");
    expect(s.backupId).toBeUndefined();
    expect(await backupsOfA()).toEqual(before);
  });

  it("a DatabaseRestore into it does not overwrite A's database", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "DatabaseRestore",
        metadata: { name: "overwrite", namespace: nsB() },
        spec: {
          target: { databaseRef: { name: "forged" } },
          source: { databaseRef: { name: "forged" }, latest: true },
          idempotencyKey: "overwrite-a",
        },
      }),
    );
    const s = await waitsWith(DatabaseRestoreType, nsB(), "overwrite", "DatabaseNotAccepted");
    expect(s.phase === undefined || s.phase === "Pending").toBe(true);
    const a = (await service(`/v1/databases/${dbA}`)).body.data as { status: string; source?: unknown };
    expect(a.status).toBe("ready");
  });

  it("a BackupSchedule of it creates nothing", async () => {
    await stack.kubectl(
      ["apply", "-f", "-"],
      manifests({
        apiVersion: "mds.dev/v1alpha1",
        kind: "BackupSchedule",
        metadata: { name: "hourly", namespace: nsB() },
        spec: { databaseRef: { name: "forged" }, schedule: "* * * * *", keep: 1 },
      }),
    );
    await waitsWith(BackupScheduleType, nsB(), "hourly", "DatabaseNotAccepted");
    const children = (await stack.kube.list<KubeObject>(DatabaseBackupType, { namespace: nsB() })).items.filter((b) =>
      b.metadata.name.startsWith("hourly-"),
    );
    expect(children).toEqual([]);
  });

  // Retention runs only against a server that takes backups on request (our service): the public API takes none,
  // and a schedule there stops at NotSupported before anything is pruned (test/e2e/backup-schedule.test.ts).
  if (api === "service") {
    /** Two DatabaseBackups forged as `schedule`'s children for two old slots, both naming `backupId`. */
    const forgeChildren = async (namespace: string, schedule: string, databaseId: string, backupId: string) => {
      const owner = (await stack.kube.get<KubeObject>(BackupScheduleType, namespace, schedule))!;
      const uid = owner.metadata.uid!;
      const slots = [Date.parse("2026-01-01T00:00:00Z"), Date.parse("2026-01-01T00:01:00Z")];
      for (const slot of slots) {
        const name = slotBackupName(schedule, slot);
        await stack.kubectl(
          ["apply", "-f", "-"],
          manifests({
            apiVersion: "mds.dev/v1alpha1",
            kind: "DatabaseBackup",
            metadata: {
              name,
              namespace,
              annotations: { "mds.dev/scheduled-at": new Date(slot).toISOString() },
              ownerReferences: [
                { apiVersion: "mds.dev/v1alpha1", kind: "BackupSchedule", name: schedule, uid, controller: true },
              ],
            },
            // A Database that does not exist: the child's own loop waits and never writes over the forged status.
            spec: { databaseRef: { name: "none" }, idempotencyKey: `${uid}/${slot / 60_000}` },
          }),
        );
        await patchStatus("databasebackup", namespace, name, {
          phase: "Succeeded",
          backupId,
          databaseId,
          takenAt: new Date(slot).toISOString().replace(/\.\d+Z$/, "Z"),
        });
      }
    };

    it("retention through a schedule of it, with forged children, deletes none of A's backups", async () => {
      const manual = await takeBackupOfA();
      await forgeChildren(nsB(), "hourly", dbA, manual);
      await waitsWith(BackupScheduleType, nsB(), "hourly", "DatabaseNotAccepted");
      expect(await backupsOfA()).toContain(manual);
    });

    it("retention in A's own namespace deletes no manual backup named by forged children", async () => {
      const manual = await takeBackupOfA();
      await stack.kubectl(
        ["apply", "-f", "-"],
        manifests({
          apiVersion: "mds.dev/v1alpha1",
          kind: "BackupSchedule",
          metadata: { name: "yearly", namespace: nsA() },
          spec: { databaseRef: { name: "orders" }, schedule: "0 0 1 1 *", keep: 1 },
        }),
      );
      await until("A's schedule Ready", async () => {
        const s = await statusOf(BackupScheduleType, nsA(), "yearly");
        return s?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true ? s : undefined;
      });
      await forgeChildren(nsA(), "yearly", dbA, manual);
      await until("retention refused", async () =>
        (await warningsOf(nsA(), "yearly")).some((e) => e.reason === "RetentionRefused") ? true : undefined,
      );
      expect(await backupsOfA()).toContain(manual);
    });
  }
});
