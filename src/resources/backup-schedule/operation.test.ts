import { describe, expect, it } from "vitest";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { createFakeKube } from "../../../test/support/fake-kube.ts";
import type { KubeObject } from "../../kube/types.ts";
import { DatabaseBackupType } from "../database-backup/schema.ts";
import { Refused } from "../remote/operations.ts";
import {
  createSlotBackup,
  deleteServiceBackup,
  deleteSlotBackup,
  slotBackupName,
  type ScheduleObject,
} from "./operation.ts";

// A schedule's calls are idempotent: a slot's DatabaseBackup created twice is the one object (the second call hands
// back what holds the name), a backup or DatabaseBackup already gone is done, and a backup the service keeps is a
// typed refusal.

const schedule = {
  apiVersion: "mds.dev/v1alpha1",
  kind: "BackupSchedule",
  metadata: { name: "nightly", namespace: "team", uid: "uid-nightly" },
  spec: { databaseRef: { name: "inv" }, schedule: "0 3 * * *", keep: 2 },
} as unknown as ScheduleObject;
const slot = Date.parse("2026-11-26T03:00:00Z");

describe("the schedule's operations", () => {
  it("creates a slot's DatabaseBackup once; the second call hands back the one that holds the name", async () => {
    const kube = createFakeKube();
    expect(await createSlotBackup(kube, schedule, slot)).toEqual({ created: true });
    const again = await createSlotBackup(kube, schedule, slot);
    expect(again.created).toBe(false);
    const existing = (again as { existing: KubeObject }).existing;
    expect(existing.metadata.name).toBe(slotBackupName("nightly", slot));
    expect(existing.metadata.ownerReferences?.[0]).toMatchObject({ uid: "uid-nightly", controller: true });
    expect(existing.metadata.annotations?.["mds.dev/scheduled-at"]).toBe("2026-11-26T03:00:00Z");
    expect(existing["spec"]).toEqual({ databaseRef: { name: "inv" }, idempotencyKey: `uid-nightly/${slot / 60_000}` });
    await deleteSlotBackup(kube, existing);
    await deleteSlotBackup(kube, existing);
    expect(await kube.get(DatabaseBackupType, "team", existing.metadata.name)).toBeUndefined();
  });

  it("deletes a backup at the service; one already gone is done, one the service keeps is Refused", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false });
    const db = (await api.createDatabase({ projectId: project.id, name: "inv" })).id;
    api.backupReads = 1;
    const running = await api.createBackup(db, { idempotencyKey: "k1" });
    const refused = await deleteServiceBackup(api, db, running.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Refused);
    expect((refused as Refused).why).toBe("conflict");
    api.backupReads = 0;
    const done = await api.createBackup(db, { idempotencyKey: "k2" });
    await deleteServiceBackup(api, db, done.id);
    await deleteServiceBackup(api, db, done.id);
    expect((await api.listBackups(db, { limit: 100 })).data.map((b) => b.id)).not.toContain(done.id);
  });
});
