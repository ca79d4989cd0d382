import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { connectionCalls } from "./recovery.ts";
import { createRemoteMirror } from "../../resources/remote/mirror.ts";

// The one check between an id anyone could have written (an annotation, a label, a status) and a DELETE made with
// the database's workspace token: a resource revokes only connections of its own names on its own database, or the
// original connection of a database it created.

describe("connectionCalls.revoke", () => {
  async function setup(ownsOriginal: boolean) {
    const api = createFakeApi();
    const mirror = createRemoteMirror({ api, logger: pino({ level: "silent" }), maxAgeMs: 60_000, onChange: () => {} });
    const project = await api.createProject({ name: "p", region: "us-east-1" });
    const mine = project.database!;
    const other = await api.createDatabase({ projectId: project.id, name: "billing" });
    const base = "k8s-e2e-connection-team-b.reader";
    const calls = connectionCalls<{ metadata: { name: string; uid: string } }>({
      api,
      mirror,
      connectionName: () => base,
      ownsOriginal: () => ownsOriginal,
      plan: async () => ({ replay: undefined, originalConnectionId: undefined }),
    });
    const mint = async (databaseId: string, name: string) => (await api.createConnection(databaseId, { name })).id;
    const alive = async (databaseId: string, id: string) =>
      (await api.getDatabase(databaseId)).connections.some((c) => c.id === id);
    return { api, calls, mine, other, base, mint, alive, obj: { metadata: { name: "reader", uid: "uid-reader" } } };
  }

  it("revokes its first mint and its rotations", async () => {
    const { calls, mine, base, mint, alive, obj } = await setup(false);
    const first = await mint(mine.id, base);
    const rotated = await mint(mine.id, `${base}-rmhx2k1`);
    expect(await calls.revoke(obj, mine.id, first)).toBe("revoked");
    expect(await calls.revoke(obj, mine.id, rotated)).toBe("revoked");
    expect(await alive(mine.id, first)).toBe(false);
    expect(await alive(mine.id, rotated)).toBe(false);
  });

  it("refuses another login of its database and calls nothing", async () => {
    const { api, calls, mine, mint, alive, obj } = await setup(false);
    const victim = await mint(mine.id, "k8s-e2e-database-team-a.orders");
    const deletes = api.calls["deleteConnection"] ?? 0;
    expect(await calls.revoke(obj, mine.id, victim)).toBe("refused");
    expect(await calls.revoke(obj, mine.id, mine.defaultConnectionId!)).toBe("refused");
    expect(api.calls["deleteConnection"] ?? 0).toBe(deletes);
    expect(await alive(mine.id, victim)).toBe(true);
  });

  it("never reaches a connection of another database, even one of its own name there", async () => {
    const { api, calls, mine, other, base, mint, alive, obj } = await setup(false);
    const elsewhere = await mint(other.id, base);
    expect(await calls.revoke(obj, mine.id, elsewhere)).toBe("absent");
    expect(await calls.revoke(obj, mine.id, "con_cnotthere0000000000000000")).toBe("absent");
    expect(api.calls["deleteConnection"] ?? 0).toBe(0);
    expect(await alive(other.id, elsewhere)).toBe(true);
  });

  it("revokes the database's original connection only for the resource that created the database", async () => {
    const created = await setup(true);
    expect(await created.calls.revoke(created.obj, created.mine.id, created.mine.defaultConnectionId!)).toBe("revoked");
    const adopted = await setup(false);
    expect(await adopted.calls.revoke(adopted.obj, adopted.mine.id, adopted.mine.defaultConnectionId!)).toBe("refused");
  });
});
