import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { evaluate } from "@marcbachmann/cel-js";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { crdOf } from "../kit/crd.ts";
import { crdDefinitions } from "../crd-files.ts";
import { changesOf, enumChanges } from "./changes.ts";
import { ConversionError, convertObject } from "./convert.ts";

type Obj = Record<string, unknown>;
const alpha = "mds.dev/v1alpha1";
const beta = "mds.dev/v1beta1";

// Anything at all beside the changed fields: conversion must carry it over untouched.
const noise = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 8 }),
  fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<unknown>,
  { maxKeys: 4 },
);

function setAt(obj: Obj, path: readonly string[], value: string): void {
  let node = obj;
  for (const name of path.slice(0, -1)) {
    const next = node[name];
    node = node[name] = typeof next === "object" && next !== null && !Array.isArray(next) ? (next as Obj) : {};
  }
  node[path.at(-1)!] = value;
}

/** An object of `kind` in `version`, each changed field absent or one of that version's values. */
function objectOf(kind: string, apiVersion: string): fc.Arbitrary<Obj> {
  const changes = changesOf(kind);
  return fc
    .record({
      metadata: fc.record({
        name: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
        annotations: fc.option(fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })), {
          nil: undefined,
        }),
      }),
      spec: noise,
      status: noise,
      picks: fc.tuple(
        ...changes.map((c) =>
          fc.option(fc.constantFrom(...(apiVersion === alpha ? Object.keys(c.values) : Object.values(c.values))), {
            nil: undefined,
          }),
        ),
      ),
    })
    .map(({ metadata, spec, status, picks }) => {
      const obj: Obj = { apiVersion, kind, metadata: JSON.parse(JSON.stringify(metadata)) as Obj, spec, status };
      changes.forEach((c, i) => {
        if (picks[i] !== undefined) setAt(obj, c.path, picks[i]);
      });
      return structuredClone(obj);
    });
}

const kinds = crdDefinitions.map((d) => d.kind);

describe("conversion between v1alpha1 and v1beta1", () => {
  it("covers all six kinds", () => {
    expect(kinds.sort()).toEqual(
      ["BackupSchedule", "Connection", "Database", "DatabaseBackup", "DatabaseRestore", "Project"].sort(),
    );
  });

  it.each(kinds)("%s: v1alpha1 → v1beta1 → v1alpha1 is the identity", (kind) => {
    fc.assert(
      fc.property(objectOf(kind, alpha), (obj) => {
        const before = structuredClone(obj);
        const there = convertObject(obj, beta);
        expect(there["apiVersion"]).toBe(beta);
        expect(convertObject(there, alpha)).toEqual(before);
        expect(obj).toEqual(before); // the input is not modified
      }),
    );
  });

  it.each(kinds)("%s: v1beta1 → v1alpha1 → v1beta1 is the identity", (kind) => {
    fc.assert(
      fc.property(objectOf(kind, beta), (obj) => {
        expect(convertObject(convertObject(obj, alpha), beta)).toEqual(obj);
      }),
    );
  });

  it.each(kinds)("%s: a converted object has the target version's values and nothing else moved", (kind) => {
    fc.assert(
      fc.property(objectOf(kind, alpha), (obj) => {
        const there = convertObject(obj, beta);
        const strip = (o: Obj) => {
          const copy = structuredClone(o);
          delete copy["apiVersion"];
          for (const c of changesOf(kind)) setAt(copy, c.path, "x");
          return copy;
        };
        expect(strip(there)).toEqual(strip(obj));
        for (const c of changesOf(kind)) {
          const read = (o: Obj) => c.path.reduce<unknown>((n, k) => (n as Obj | undefined)?.[k], o);
          const value = read(obj);
          if (typeof value === "string") expect(read(there)).toBe(c.values[value]);
        }
      }),
    );
  });

  it("converts the examples' objects into v1beta1 objects that satisfy the v1beta1 CEL rules", () => {
    const root = fileURLToPath(new URL("../../../examples", import.meta.url));
    const dirs = ["", "restore", "clone", "credentials", "backup", "backup-schedule", "preview"];
    const objects = dirs.flatMap((d) =>
      readdirSync(join(root, d))
        .filter((f) => f.endsWith(".yaml"))
        .flatMap((f) => parseAllDocuments(readFileSync(join(root, d, f), "utf8")).map((doc) => doc.toJS() as Obj)),
    );
    const ours = objects.filter((o) => typeof o["apiVersion"] === "string" && o["apiVersion"].startsWith("mds.dev/"));
    expect(ours.length).toBeGreaterThan(5);
    for (const obj of ours) {
      const v1beta1 = convertObject(convertObject(obj, alpha), beta);
      const def = crdDefinitions.find((d) => d.kind === obj["kind"])!;
      const crd = crdOf(def, { conversion: { url: "https://127.0.0.1/convert" } }) as {
        spec: { versions: { name: string; schema: { openAPIV3Schema: Obj } }[] };
      };
      const schema = crd.spec.versions.find((v) => v.name === "v1beta1")!.schema.openAPIV3Schema;
      expect(celViolations(schema, v1beta1), String(obj["kind"])).toEqual([]);
      for (const c of changesOf(def.kind)) {
        const value = c.path.reduce<unknown>((n, k) => (n as Obj | undefined)?.[k], v1beta1);
        if (value !== undefined) expect(Object.values(c.values)).toContain(value);
      }
    }
  });

  it("the v1beta1 CEL rules speak the v1beta1 values", () => {
    const crd = crdOf(
      crdDefinitions.find((d) => d.kind === "Database")!,
      { conversion: { url: "https://h/c" } },
    ) as {
      spec: { versions: { name: string; schema: { openAPIV3Schema: Obj } }[] };
    };
    const schema = crd.spec.versions.find((v) => v.name === "v1beta1")!.schema.openAPIV3Schema;
    const spec = (source: Obj) => ({ spec: { projectRef: { name: "p" }, source } });
    expect(celViolations(schema, spec({ type: "Empty", backupId: "bkp_12345678" }))).toEqual([
      "source of type Empty takes no databaseRef, databaseId, backupId or latest",
    ]);
    expect(celViolations(schema, spec({ type: "Database", databaseRef: { name: "a" }, latest: true }))).toEqual([
      "source of type Database takes no backupId or latest (a clone copies the live database)",
    ]);
  });

  it("refuses what it cannot convert with a message naming the problem", () => {
    const db = { apiVersion: alpha, kind: "Database", metadata: { name: "a" }, spec: {} };
    expect(() => convertObject(db, "mds.dev/v2")).toThrow(ConversionError);
    expect(() => convertObject(db, "mds.dev/v2")).toThrow(/"mds.dev\/v2" is not one of mds.dev\/v1alpha1/);
    expect(() => convertObject({ ...db, apiVersion: "apps/v1" }, beta)).toThrow(ConversionError);
    expect(() => convertObject({ ...db, kind: undefined }, beta)).toThrow(/no kind/);
  });

  it("leaves a value outside the enum as it is", () => {
    const db = { apiVersion: alpha, kind: "Database", metadata: { name: "a" }, spec: { source: { type: "Tape" } } };
    expect(convertObject(db, beta)).toEqual({ ...db, apiVersion: beta });
  });

  it("changes only enums (each a bijection), so no field needs an annotation", () => {
    for (const c of enumChanges) expect(new Set(Object.values(c.values)).size).toBe(Object.keys(c.values).length);
  });
});

// The schema's x-kubernetes-validations on create (no oldSelf), as the API server runs them.
function celViolations(schema: Obj, value: unknown): string[] {
  if (value === undefined || value === null || typeof value !== "object") return [];
  const found: string[] = [];
  for (const v of (schema["x-kubernetes-validations"] as { rule: string; message: string }[] | undefined) ?? []) {
    if (v.rule.includes("oldSelf")) continue;
    if (evaluate(v.rule, { self: value }) !== true) found.push(v.message);
  }
  for (const [name, child] of Object.entries((schema["properties"] as Record<string, Obj> | undefined) ?? {}))
    found.push(...celViolations(child, (value as Obj)[name]));
  return found;
}
