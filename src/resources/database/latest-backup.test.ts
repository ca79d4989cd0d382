import { describe, expect, it } from "vitest";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { latestBackupOf, newestCompleted } from "../remote/backups.ts";
import { backupAges } from "./latest-backup.ts";

// status.latestBackup and mds_database_backup_age_seconds: the newest completed backup, whoever took it; a list that
// cannot be read is "unknown" (the status keeps its value), never "no backup".

describe("latest backup", () => {
  it("is the newest completed one, whatever the list's order; running and failed ones do not count", () => {
    const b = (id: string, status: string, createdAt: string, size?: number | null) => ({
      id,
      status,
      createdAt,
      size,
    });
    expect(
      newestCompleted([
        b("bkp_old", "completed", "2026-11-20T00:00:00Z", 10),
        b("bkp_running", "running", "2026-11-22T00:00:00Z", null),
        b("bkp_new", "completed", "2026-11-21T00:00:00.123Z", null),
        b("bkp_failed", "failed", "2026-11-23T00:00:00Z", null),
      ]),
    ).toEqual({ id: "bkp_new", time: "2026-11-21T00:00:00Z" });
    expect(newestCompleted([b("bkp_running", "running", "2026-11-22T00:00:00Z")])).toBeUndefined();
  });

  it("reads the list at most once a minute per database, and a failed read is unknown", async () => {
    const api = createFakeApi();
    const t = Date.parse("2026-11-26T00:00:00Z");
    expect(await latestBackupOf(api, "db_one00000", t)).toMatchObject({ id: "bkp_c000000000000000000000001" });
    await latestBackupOf(api, "db_one00000", t + 30_000);
    expect(api.calls["listBackups"]).toBe(1);
    api.failNext("listBackups", Object.assign(new Error("down"), { code: "unavailable", status: 503 }));
    expect(await latestBackupOf(api, "db_one00000", t + 61_000)).toBe("unknown");
  });

  it("ages count from the newest backup, or from the Database's creation when it has none; none without a remote id", () => {
    const now = Date.parse("2026-11-26T12:00:00Z");
    const db = (name: string, status: object | undefined) => ({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name, namespace: "shop", creationTimestamp: "2026-11-26T00:00:00Z" },
      status,
    });
    expect(
      backupAges(
        [
          db("backed", { id: "db_a", latestBackup: { id: "bkp_x", time: "2026-11-26T11:00:00Z" } }),
          db("never", { id: "db_b" }),
          db("creating", {}),
        ],
        now,
      ),
    ).toEqual([
      { namespace: "shop", name: "backed", seconds: 3600 },
      { namespace: "shop", name: "never", seconds: 12 * 3600 },
    ]);
  });
});
