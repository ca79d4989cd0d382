import { describe, expect, it } from "vitest";
import { createFakeApi, FakeApiError, type FakeApi } from "../../../test/support/fake-api.ts";
import { ReconcileError } from "../../operator/errors.ts";
import { Refused } from "../remote/operations.ts";
import { findBackup, requestBackup } from "./operation.ts";

// The backup's calls: a refusal (a 4xx, so the POST did not act) is a typed Refused saying which; anything else is
// thrown as it came, so the controller can tell a POST that may have landed.

async function withDatabase(api: FakeApi): Promise<string> {
  const project = await api.createProject({ name: "p", createDatabase: false });
  return (await api.createDatabase({ projectId: project.id, name: "inv" })).id;
}

const refusalOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => (err instanceof Refused ? err.why : err),
  );

describe("the backup operation", () => {
  it("requests one backup per request key: the same key is the same backup", async () => {
    const api = createFakeApi();
    const db = await withDatabase(api);
    const first = await requestBackup(api, db, "key-1");
    expect((await requestBackup(api, db, "key-1")).id).toBe(first.id);
    expect(api.backupsTaken).toBe(1);
    expect((await findBackup(api, db, first.id)).status).toBe("completed");
  });

  it("says NotSupported where the route is missing but the database is there (the public API)", async () => {
    const api = createFakeApi({ publicApi: true });
    const db = await withDatabase(api);
    expect(await refusalOf(requestBackup(api, db, "key-1"))).toBe("NotSupported");
  });

  it("says DatabaseGone when the database is not there", async () => {
    expect(await refusalOf(requestBackup(createFakeApi(), "db_missing", "key-1"))).toBe("DatabaseGone");
  });

  it("says Invalid for a refused request, and throws a failure that may have landed as it came", async () => {
    const api = createFakeApi();
    const db = await withDatabase(api);
    api.failNext("createBackup", new FakeApiError("invalid_request", 400, "no such thing"));
    expect(await refusalOf(requestBackup(api, db, "key-1"))).toBe("Invalid");
    const unavailable = new FakeApiError("unavailable", 503, "try later");
    api.failNext("createBackup", unavailable);
    expect(await refusalOf(requestBackup(api, db, "key-2"))).toBe(unavailable);
  });

  it("finds a backup only in the database's own list", async () => {
    const api = createFakeApi();
    const db = await withDatabase(api);
    const other = (await api.createDatabase({ projectId: (await api.listProjects()).data[0]!.id, name: "other" })).id;
    const backup = await requestBackup(api, other, "key-1");
    const err = await findBackup(api, db, backup.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReconcileError);
    expect((err as ReconcileError).reason).toBe("RemoteNotFound");
  });
});
