import { describe, expect, it } from "vitest";
import { evaluate } from "@marcbachmann/cel-js";
import { fileURLToPath } from "node:url";
import { crdOf, openApiSchemaOf } from "./crd.ts";
import { crdDefinitions } from "../crd-files.ts";
import { findCrdDrift } from "../../cli/crds.ts";

type Json = { [key: string]: unknown };
const crdsDir = fileURLToPath(new URL("../../../crds", import.meta.url));

function walk(node: Json, path: string, visit: (node: Json, path: string) => void): void {
  visit(node, path);
  for (const [name, child] of Object.entries((node.properties as Record<string, Json> | undefined) ?? {})) {
    walk(child, `${path}.${name}`, visit);
  }
  if (node.items) walk(node.items as Json, `${path}[]`, visit);
  if (typeof node.additionalProperties === "object") walk(node.additionalProperties as Json, `${path}{}`, visit);
}

// Evaluates the schema's x-kubernetes-validations the way the apiserver does: each rule at its node, transition
// rules (those reading oldSelf) only on updates where the node existed before.
function violations(schema: Json, value: unknown, old: unknown): string[] {
  if (value === undefined || value === null) return [];
  const found: string[] = [];
  for (const v of (schema["x-kubernetes-validations"] as { rule: string; message: string }[] | undefined) ?? []) {
    if (v.rule.includes("oldSelf") && old === undefined) continue;
    if (evaluate(v.rule, { self: value, oldSelf: old }) !== true) found.push(v.message);
  }
  const properties = (schema.properties as Record<string, Json> | undefined) ?? {};
  for (const [name, child] of Object.entries(properties)) {
    const rec = value as Record<string, unknown>;
    const prev = old as Record<string, unknown> | undefined;
    found.push(...violations(child, rec[name], prev?.[name]));
  }
  return found;
}

const specSchema = (kind: string): Json => {
  const def = crdDefinitions.find((k) => k.kind === kind);
  if (!def) throw new Error(`no kind ${kind}`);
  return openApiSchemaOf(def.spec);
};

describe("CRDs", () => {
  it("crds/*.yaml match the schemas (run `npm run crds` after changing a schema)", async () => {
    expect(await findCrdDrift(crdsDir)).toEqual([]);
  });

  it.each(crdDefinitions.map((k) => [k.kind, k] as const))("%s: every field has a description", (_kind, def) => {
    const missing: string[] = [];
    for (const part of ["spec", "status"] as const) {
      walk(openApiSchemaOf(def[part]), part, (node, path) => {
        if (typeof node.description !== "string" || node.description.length === 0) missing.push(path);
      });
    }
    expect(missing).toEqual([]);
  });

  it.each(crdDefinitions.map((k) => [k.kind, k] as const))("%s: the schema is structural", (_kind, def) => {
    const problems: string[] = [];
    const root = (crdOf(def).spec as { versions: { schema: { openAPIV3Schema: Json } }[] }).versions[0]!.schema
      .openAPIV3Schema;
    walk(root, "", (node, path) => {
      for (const bad of ["anyOf", "oneOf", "allOf", "not", "const", "propertyNames", "$schema", "$ref"]) {
        if (bad in node) problems.push(`${path}: ${bad}`);
      }
      if (node.additionalProperties === false) problems.push(`${path}: additionalProperties false`);
      if (typeof node.type !== "string") problems.push(`${path}: no type`);
      if (node.properties && node.additionalProperties) problems.push(`${path}: properties with additionalProperties`);
    });
    expect(problems).toEqual([]);
  });

  it("names, short names, category and the status subresource", () => {
    const names = crdDefinitions.map((def) => {
      const spec = crdOf(def).spec as {
        names: { shortNames: string[]; categories: string[] };
        versions: { subresources: unknown }[];
      };
      return [def.kind, spec.names.shortNames, spec.names.categories, spec.versions[0]!.subresources];
    });
    expect(names).toEqual([
      ["Project", ["mdsproject"], ["mds"], { status: {} }],
      ["Database", ["mdsdb"], ["mds"], { status: {} }],
      ["DatabaseRestore", ["mdsrestore"], ["mds"], { status: {} }],
      ["Connection", ["mdsconn"], ["mds"], { status: {} }],
      ["DatabaseBackup", ["mdsbackup"], ["mds"], { status: {} }],
      ["BackupSchedule", ["mdsbackupschedule"], ["mds"], { status: {} }],
    ]);
  });
});

describe("CEL rules", () => {
  const db = specSchema("Database");
  const project = specSchema("Project");
  const restore = specSchema("DatabaseRestore");
  const base = { projectRef: { name: "app" }, region: "inherit", deletionPolicy: "Retain" };

  it("accepts a valid Database and an unchanged update", () => {
    expect(violations(db, base, undefined)).toEqual([]);
    expect(violations(db, { ...base, displayName: "renamed" }, base)).toEqual([]);
  });

  it("refuses mds.dev/ keys in connectionSecret.labels and .annotations: they are the operator's records", () => {
    const message =
      "mds.dev/ keys are the operator's: remove them from connectionSecret.labels and connectionSecret.annotations";
    const secret = (extra: object) => ({ ...base, connectionSecret: extra });
    expect(violations(db, secret({ annotations: { "mds.dev/revoke": "con_x" } }), undefined)).toEqual([message]);
    expect(violations(db, secret({ labels: { "mds.dev/connection-id": "con_x" } }), undefined)).toEqual([message]);
    expect(
      violations(
        specSchema("Connection"),
        { databaseRef: { name: "orders" }, connectionSecret: { annotations: { "mds.dev/restores": "[]" } } },
        undefined,
      ),
    ).toEqual([message]);
    expect(
      violations(
        db,
        secret({ labels: { team: "a" }, annotations: { "example.com/mds.dev": "x", "reflector/mds.dev/x": "y" } }),
        undefined,
      ),
    ).toEqual([]);
  });

  it("refuses a Database naming two projects, or none", () => {
    expect(violations(db, { ...base, projectId: "proj_c123456789012345678901234" }, undefined)).toEqual([
      "exactly one of projectRef.name or projectId must be set",
    ]);
    expect(violations(db, { region: "inherit" }, undefined)).toEqual([
      "exactly one of projectRef.name or projectId must be set",
    ]);
  });

  it("refuses changed immutable fields with a message naming the field", () => {
    expect(violations(db, { ...base, region: "eu-west-3" }, base)).toEqual([
      "region is immutable: it cannot be added, changed or removed after creation",
    ]);
    expect(violations(db, { ...base, projectRef: { name: "other" } }, base)).toEqual([
      "projectRef is immutable: it cannot be added, changed or removed after creation",
    ]);
    expect(violations(db, { ...base, externalId: "db_c123456789012345678901234" }, base)).toEqual([
      "externalId is immutable: it cannot be added, changed or removed after creation",
    ]);
    expect(
      violations(db, { ...base, connectionSecret: { name: "b" } }, { ...base, connectionSecret: { name: "a" } }),
    ).toEqual(["connectionSecret.name is immutable: create a new resource to use another Secret"]);
    expect(violations(project, { region: "eu-west-3" }, { region: "us-east-1" })).toEqual([
      "region is immutable: it cannot be added, changed or removed after creation",
    ]);
  });

  it("checks a Database's source", () => {
    const src = (s: Json) => violations(db, { ...base, source: s }, undefined);
    expect(src({ type: "empty" })).toEqual([]);
    expect(src({ type: "backup", databaseRef: { name: "a" }, latest: true })).toEqual([]);
    expect(src({ type: "backup", databaseRef: { name: "a" } })).toEqual([
      "source of type backup needs exactly one of backupId or latest: true",
    ]);
    expect(src({ type: "empty", backupId: "bkp_c123456789" })).toEqual([
      "source of type empty takes no databaseRef, databaseId, backupId or latest",
    ]);
    // A clone: exactly one source database, and nothing of a backup.
    expect(src({ type: "database", databaseRef: { name: "staging" } })).toEqual([]);
    expect(src({ type: "database" })).toEqual([
      "source of type database needs exactly one of databaseRef.name or databaseId",
    ]);
    expect(src({ type: "database", databaseRef: { name: "a" }, databaseId: "db_c123456789" })).toEqual([
      "source of type database needs exactly one of databaseRef.name or databaseId",
    ]);
    expect(src({ type: "database", databaseRef: { name: "a" }, latest: true })).toEqual([
      "source of type database takes no backupId or latest (a clone copies the live database)",
    ]);
  });

  it("DatabaseRestore: exactly one target, source and backup; the spec is immutable", () => {
    const ok = { target: { databaseRef: { name: "a" } }, source: { databaseRef: { name: "a" }, latest: true } };
    expect(violations(restore, ok, undefined)).toEqual([]);
    const byId =
      "a restore by databaseId (target or source) needs credentials.secretRef: a token of the database's workspace in this namespace";
    const credentials = { secretRef: { name: "team-token", key: "token" } };
    expect(
      violations(
        restore,
        { ...ok, credentials, target: { databaseRef: { name: "a" }, databaseId: "db_c123456789" } },
        undefined,
      ),
    ).toEqual(["exactly one of target.databaseRef.name or target.databaseId must be set"]);
    expect(
      violations(
        restore,
        { ...ok, credentials, source: { databaseId: "db_c123456789", backupId: "bkp_c123456789", latest: true } },
        undefined,
      ),
    ).toEqual(["exactly one of source.backupId or source.latest: true must be set"]);
    expect(violations(restore, { ...ok, source: { databaseId: "db_c123456789", latest: true } }, undefined)).toEqual([
      byId,
    ]);
    expect(
      violations(restore, { ...ok, credentials, source: { databaseId: "db_c123456789", latest: true } }, undefined),
    ).toEqual([]);
    expect(violations(restore, { ...ok, idempotencyKey: "again" }, ok)).toEqual([
      "spec is immutable: create a new DatabaseRestore to restore again",
    ]);
  });
});
