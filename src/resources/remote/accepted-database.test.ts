import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../kube/types.ts";
import { createAcceptedIds } from "../../operator/accepted.ts";
import { classifyError } from "../../operator/errors.ts";
import { acceptedDatabaseId } from "./accepted-database.ts";

const db = (uid: string, id?: string): KubeObject =>
  ({
    apiVersion: "mds.dev/v1alpha1",
    kind: "Database",
    metadata: { namespace: "a", name: "orders", uid },
    ...(id === undefined ? {} : { status: { id } }),
  }) as KubeObject;
const ref = { namespace: "a", name: "orders" };
const waitOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return { ...classifyError(err), message: (err as Error).message };
  }
  throw new Error("did not wait");
};

describe("acceptedDatabaseId", () => {
  it("counts only the id the Database's own loop accepted, for that very object", () => {
    const woken: string[] = [];
    const accepted = createAcceptedIds((kind, ns, name) => woken.push(`${kind} ${ns}/${name}`));
    accepted.accept("Database", db("u1", "db_1"), "db_1");
    expect(acceptedDatabaseId(accepted, db("u1", "db_1"), ref)).toBe("db_1");
    // A status.id written since, or another object of the same name: not accepted.
    expect(waitOf(() => acceptedDatabaseId(accepted, db("u1", "db_2"), ref)).reason).toBe("DatabaseNotAccepted");
    expect(woken).toEqual(["Database a/orders"]);
  });

  it("waits quietly for a Database its loop has not looked at yet (after a restart), loudly once it refused", () => {
    const woken: string[] = [];
    const accepted = createAcceptedIds((kind, ns, name) => woken.push(`${kind} ${ns}/${name}`));
    const forged = db("u1", "db_other");
    const before = waitOf(() => acceptedDatabaseId(accepted, forged, ref));
    expect(before).toMatchObject({ reason: "DatabaseNotAccepted", quiet: true, terminal: false });
    expect(before.message).not.toContain("db_other");
    // Its loop refuses it (an adoption conflict): the referrer is woken and now reports the wait.
    accepted.forget("Database", forged);
    expect(woken).toEqual(["Database a/orders"]);
    const after = waitOf(() => acceptedDatabaseId(accepted, forged, ref));
    expect(after).toMatchObject({ reason: "DatabaseNotAccepted", quiet: false });
    expect(after.message).toContain("db_other");
    // Gone, then created again under another uid: undecided again, so quiet again until its loop runs.
    accepted.forget("Database", forged, { gone: true });
    expect(waitOf(() => acceptedDatabaseId(accepted, db("u2", "db_other"), ref)).quiet).toBe(true);
    // Its loop ran and neither accepted nor refused (an outage): the wait is reported, and the referrer was woken.
    accepted.looked("Database", db("u2", "db_other"));
    expect(waitOf(() => acceptedDatabaseId(accepted, db("u2", "db_other"), ref)).quiet).toBe(false);
    expect(woken).toEqual(["Database a/orders", "Database a/orders"]);
  });

  it("says DatabaseNotReady, loudly, for a Database that is missing or has no id", () => {
    const accepted = createAcceptedIds();
    expect(waitOf(() => acceptedDatabaseId(accepted, undefined, ref))).toMatchObject({
      reason: "DatabaseNotReady",
      quiet: false,
    });
    expect(waitOf(() => acceptedDatabaseId(accepted, db("u1"), ref))).toMatchObject({
      reason: "DatabaseNotReady",
      quiet: false,
    });
  });
});
