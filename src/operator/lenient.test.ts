import { describe, expect, it } from "vitest";
import type { KubeObject } from "../kube/types.ts";
import { Database } from "../resources/database/schema.ts";
import { DatabaseRestore } from "../resources/database-restore/schema.ts";
import { parseOrTerminal } from "./controller.ts";

// What a newer version of mds may have written into status, read by this one: kept and ignored, never an error.
// The spec stays strict.

const condition = (type: string, status = "True") => ({
  type,
  status,
  reason: "ReconcileSuccess",
  message: "",
  lastTransitionTime: "2026-11-01T00:00:00Z",
});

const database = (status: Record<string, unknown>, spec: Record<string, unknown> = {}): KubeObject =>
  ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { name: "orders", namespace: "default", generation: 1 },
    spec: { projectRef: { name: "shop" }, ...spec },
    status,
  }) as KubeObject;

describe("status read leniently", () => {
  it("keeps conditions of types it does not know, with its own", () => {
    const raw = database({
      conditions: [condition("Ready"), condition("Hibernating"), condition("example.com/Audited")],
    });
    const parsed = parseOrTerminal(Database, "Database", raw);
    expect(parsed.status?.conditions?.map((c) => c.type)).toEqual(["Ready", "Hibernating", "example.com/Audited"]);
  });

  it("leaves out a field with a value it does not know, and an unknown field, keeping the rest", () => {
    const raw = database({
      id: "db_1",
      remoteStatus: "hibernating",
      source: { type: "snapshot", databaseId: "db_0" },
      futureField: { deep: true },
      conditions: [condition("Ready")],
    });
    const parsed = parseOrTerminal(Database, "Database", raw);
    expect(parsed.status).toEqual({ id: "db_1", conditions: [condition("Ready")] });
    // The object read is not changed: what was left out stays on the server (status writes are merge patches).
    expect((raw["status"] as Record<string, unknown>)["remoteStatus"]).toBe("hibernating");
  });

  it("keeps a list whose elements it cannot read as it was, so a status write never drops an element", () => {
    const ledger = [
      { key: "default/a", phase: "Succeeded" },
      { key: "default/b", phase: "Verified", verifiedAt: "2026-11-02T00:00:00Z" },
    ];
    const conditions = Array.from({ length: 10 }, (_, i) => condition(`Future${i}`));
    const parsed = parseOrTerminal(Database, "Database", database({ restoreLedger: ledger, conditions, id: "db_1" }));
    expect(parsed.status).toEqual({ id: "db_1", restoreLedger: ledger, conditions });
  });

  it("reads a one-shot phase it does not know as absent (the loop then leaves the operation alone)", () => {
    const raw = {
      apiVersion: "mds.dev/v1alpha1",
      kind: "DatabaseRestore",
      metadata: { name: "r", namespace: "default", generation: 1 },
      spec: { target: { databaseRef: { name: "orders" } }, source: { databaseRef: { name: "orders" }, latest: true } },
      status: { phase: "Verifying", idempotencyKey: "default/r", conditions: [condition("Ready")] },
    } as KubeObject;
    const parsed = parseOrTerminal(DatabaseRestore, "DatabaseRestore", raw);
    expect(parsed.status).toEqual({ idempotencyKey: "default/r", conditions: [condition("Ready")] });
  });

  it("stays strict on the spec: an unknown spec field or value is InvalidSpec, whatever status holds", () => {
    expect(() =>
      parseOrTerminal(Database, "Database", database({ remoteStatus: "hibernating" }, { region: "mars-1" })),
    ).toThrow(/invalid Database "orders":.*spec\.region/);
    expect(() =>
      parseOrTerminal(Database, "Database", { ...database({}), metadata: { generation: 1 } } as unknown as KubeObject),
    ).toThrow(/invalid Database/);
  });
});
