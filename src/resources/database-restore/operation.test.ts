import { describe, expect, it } from "vitest";
import { createFakeApi, FakeApiError } from "../../../test/support/fake-api.ts";
import { Refused } from "../remote/operations.ts";
import { sourceKeyOf, startRestore } from "./operation.ts";

// The restore's call: one restore per target and key (a re-POST replays), a refusal typed, any other failure thrown
// as it came (it may have landed: the controller decides whether asking again is safe).

describe("the restore operation", () => {
  it("restores once per target and key; a refusal is Refused, a failure that may have landed comes as it is", async () => {
    const api = createFakeApi();
    const project = await api.createProject({ name: "p", createDatabase: false });
    const target = (await api.createDatabase({ projectId: project.id, name: "inv" })).id;
    const restored = await startRestore(api, target, "db_source", "bkp_1", "key-1");
    expect(sourceKeyOf(restored.source)).toBe(
      sourceKeyOf({ type: "backup", databaseId: "db_source", backupId: "bkp_1" }),
    );
    await startRestore(api, target, "db_source", "bkp_1", "key-1");
    expect(api.restores).toBe(1);

    const refused = await startRestore(api, "db_missing", "db_source", "bkp_1", "key-1").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Refused);
    expect((refused as Refused).why).toBe("not_found");
    const unavailable = new FakeApiError("unavailable", 503, "try later");
    api.failNext("restoreDatabase", unavailable);
    expect(await startRestore(api, target, "db_source", "bkp_1", "key-2").catch((e: unknown) => e)).toBe(unavailable);
  });
});
