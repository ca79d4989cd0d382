import { describe, expect, it } from "vitest";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { TerminalError, WaitingError } from "../../operator/errors.ts";
import { sourceOf } from "./source.ts";
import type { Database } from "./schema.ts";

// A clone's source (spec.source type database): resolved from the spec, created only from a ready database.

const clone = (source: NonNullable<Database["spec"]["source"]>, credentials?: Database["spec"]["credentials"]) =>
  ({
    metadata: { namespace: "team" },
    spec: {
      projectId: "proj_c1",
      region: "inherit",
      isDefault: false,
      source,
      ...(credentials ? { credentials } : {}),
    },
  }) as unknown as Pick<Database, "spec"> & {
    metadata: { namespace: string };
  };

async function sourceDatabase(provisioningReads: number) {
  const api = createFakeApi();
  api.provisioningReads = provisioningReads;
  const project = await api.createProject({ name: "p" });
  const db = await api.createDatabase({ projectId: project.id, name: "staging" });
  return { api, id: db.id };
}

async function reasonOf(p: Promise<unknown>) {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  return err instanceof WaitingError
    ? `waiting ${err.reason}`
    : err instanceof TerminalError
      ? `terminal ${err.reason}`
      : String(err);
}

describe("sourceOf a clone", () => {
  it("sends type database with the referenced Database's remote id once it is ready", async () => {
    const { api, id } = await sourceDatabase(0);
    const ids = (ns: string, name: string) => (ns === "team" && name === "staging" ? id : undefined);
    expect(await sourceOf(api, clone({ type: "database", databaseRef: { name: "staging" } }), ids)).toEqual({
      type: "database",
      databaseId: id,
    });
  });

  it("waits (SourceNotReady, retried) for a source Database that is missing, has no id yet, or is still provisioning", async () => {
    const { api, id } = await sourceDatabase(5);
    expect(
      await reasonOf(sourceOf(api, clone({ type: "database", databaseRef: { name: "staging" } }), () => undefined)),
    ).toBe("waiting SourceNotReady");
    expect(await reasonOf(sourceOf(api, clone({ type: "database", databaseRef: { name: "staging" } }), () => id))).toBe(
      "waiting SourceNotReady",
    );
  });

  it("refuses a backup source by databaseId without spec.credentials (Stalled), as a clone by id", async () => {
    const { api, id } = await sourceDatabase(0);
    expect(
      await reasonOf(sourceOf(api, clone({ type: "backup", databaseId: id, latest: true }), () => undefined)),
    ).toBe("terminal InvalidSpec");
  });

  it("refuses a clone by databaseId without spec.credentials (Stalled), and takes it with them", async () => {
    const { api, id } = await sourceDatabase(0);
    expect(await reasonOf(sourceOf(api, clone({ type: "database", databaseId: id }), () => undefined))).toBe(
      "terminal InvalidSpec",
    );
    const own = { secretRef: { name: "team-token", key: "token" } };
    expect(await sourceOf(api, clone({ type: "database", databaseId: id }, own), () => undefined)).toEqual({
      type: "database",
      databaseId: id,
    });
  });
});
