import { describe, expect, it } from "vitest";
import { SchemaError, compileSchema, formatFieldError } from "./index.ts";

const schema = compileSchema({
  type: "object",
  properties: {
    spec: {
      type: "object",
      properties: {
        size: { type: "integer", default: 1 },
        policy: { type: "string", default: "Delete" },
        note: { type: "string", nullable: true, default: "n" },
        plain: { type: "string" },
        nested: { type: "object", properties: { a: { type: "string", default: "x" } } },
        withDefaultObj: { type: "object", default: {}, properties: { b: { type: "integer", default: 2 } } },
        free: {
          type: "object",
          "x-kubernetes-preserve-unknown-fields": true,
          properties: { known: { type: "object", properties: { k: { type: "string" } } } },
        },
        items: {
          type: "array",
          items: { type: "object", properties: { name: { type: "string" }, w: { type: "integer", default: 5 } } },
        },
        map: { type: "object", additionalProperties: { type: "object", properties: { v: { type: "string" } } } },
        port: { "x-kubernetes-int-or-string": true },
        embedded: {
          type: "object",
          "x-kubernetes-embedded-resource": true,
          properties: { spec: { type: "object", properties: { x: { type: "string" } } } },
        },
      },
    },
    status: { type: "object", properties: { phase: { type: "string" } } },
  },
});

describe("prune", () => {
  it("drops unknown fields at every level and reports their paths, keeping root apiVersion/kind/metadata", () => {
    const { object, unknownFields } = schema.prune({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "d", labels: { a: "b" } },
      spec: {
        bogus: 1,
        size: 2,
        nested: { a: "y", typo: true },
        free: { anything: { deep: 1 }, known: { k: "v", gone: 1 } },
        items: [{ name: "a", extra: 1 }],
        map: { k1: { v: "1", x: 2 } },
        port: 8080,
        embedded: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "c", bogusMeta: 1 },
          spec: { x: "1", y: "2" },
          other: 1,
        },
      },
      extra: "top",
    });
    expect(object).toEqual({
      apiVersion: "mds.dev/v1alpha1",
      kind: "Database",
      metadata: { name: "d", labels: { a: "b" } },
      spec: {
        size: 2,
        nested: { a: "y" },
        free: { anything: { deep: 1 }, known: { k: "v" } },
        items: [{ name: "a" }],
        map: { k1: { v: "1" } },
        port: 8080,
        embedded: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, spec: { x: "1" } },
      },
    });
    expect(unknownFields).toEqual([
      "extra",
      "spec.bogus",
      "spec.embedded.metadata.bogusMeta",
      "spec.embedded.other",
      "spec.embedded.spec.y",
      "spec.free.known.gone",
      "spec.items[0].extra",
      "spec.map.k1.x",
      "spec.nested.typo",
    ]);
  });

  it("does not modify its input", () => {
    const input = { spec: { bogus: 1 } };
    schema.prune(input);
    expect(input).toEqual({ spec: { bogus: 1 } });
  });
});

describe("applyDefaults", () => {
  const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
    [
      "absent fields get defaults",
      { spec: {} },
      { spec: { size: 1, policy: "Delete", note: "n", withDefaultObj: { b: 2 } } },
    ],
    ["no parent, no nested default", {}, {}],
    [
      "nested default only when the parent exists",
      { spec: { nested: {} } },
      { spec: { size: 1, policy: "Delete", note: "n", withDefaultObj: { b: 2 }, nested: { a: "x" } } },
    ],
    [
      "null on non-nullable with default is defaulted",
      { spec: { size: null } },
      { spec: { size: 1, policy: "Delete", note: "n", withDefaultObj: { b: 2 } } },
    ],
    [
      "null on nullable stays null",
      { spec: { note: null } },
      { spec: { size: 1, policy: "Delete", note: null, withDefaultObj: { b: 2 } } },
    ],
    [
      "null on non-nullable without default is dropped",
      { spec: { plain: null } },
      { spec: { size: 1, policy: "Delete", note: "n", withDefaultObj: { b: 2 } } },
    ],
    [
      "explicit values win",
      { spec: { size: 7, policy: "Retain" } },
      { spec: { size: 7, policy: "Retain", note: "n", withDefaultObj: { b: 2 } } },
    ],
    [
      "list items are defaulted",
      { spec: { items: [{ name: "a" }, { name: "b", w: 1 }] } },
      {
        spec: {
          size: 1,
          policy: "Delete",
          note: "n",
          withDefaultObj: { b: 2 },
          items: [
            { name: "a", w: 5 },
            { name: "b", w: 1 },
          ],
        },
      },
    ],
  ];
  it.each(cases)("%s", (_n, input, want) => {
    expect(schema.applyDefaults(input)).toEqual(want);
  });

  it("never modifies its input (nor does validate)", () => {
    const input = { spec: { size: null, items: [{ name: "a" }] } };
    const copy = structuredClone(input);
    schema.applyDefaults(input);
    schema.validate(input, copy);
    expect(input).toEqual(copy);
  });
});

describe("compileSchema rejects non-structural schemas", () => {
  const cases: [string, unknown, string[]][] = [
    ["root type missing", { properties: {} }, ["type: Required value: must not be empty at the root"]],
    ["root not object", { type: "string" }, ['type: Invalid value: "string": must be object at the root']],
    [
      "property type missing",
      { type: "object", properties: { spec: { properties: {} } } },
      ["properties[spec].type: Required value: must not be empty for specified object fields"],
    ],
    [
      "items type missing",
      { type: "object", properties: { l: { type: "array", items: {} } } },
      ["properties[l].items.type: Required value: must not be empty for specified array items"],
    ],
    [
      "array without items",
      { type: "object", properties: { l: { type: "array" } } },
      ["properties[l].items: Required value: must be specified"],
    ],
    [
      "unknown type",
      { type: "object", properties: { a: { type: "int" } } },
      [
        'properties[a].type: Unsupported value: "int": supported values: "object", "array", "string", "integer", "number", "boolean"',
      ],
    ],
    [
      "uniqueItems",
      { type: "object", properties: { l: { type: "array", items: { type: "string" }, uniqueItems: true } } },
      [
        "properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
      ],
    ],
    [
      "additionalProperties false",
      { type: "object", properties: { m: { type: "object", additionalProperties: false } } },
      ["properties[m].additionalProperties: Forbidden: must not be used with additionalProperties: false"],
    ],
    [
      "$ref",
      { type: "object", properties: { m: { $ref: "#/x", type: "object" } } },
      ["properties[m].$ref: Forbidden: $ref is not supported"],
    ],
    [
      "preserve false",
      { type: "object", "x-kubernetes-preserve-unknown-fields": false },
      ["x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"],
    ],
    [
      "map list without keys",
      {
        type: "object",
        properties: { l: { type: "array", "x-kubernetes-list-type": "map", items: { type: "object" } } },
      },
      [
        'properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is "map"',
      ],
    ],
    [
      "map key not required",
      {
        type: "object",
        properties: {
          l: {
            type: "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["n"],
            items: { type: "object", properties: { n: { type: "string" } } },
          },
        },
      },
      [
        "properties[l].items.properties[n]: Required value: all x-kubernetes-list-map-keys must be required or have a default value",
      ],
    ],
    [
      "invalid default",
      {
        type: "object",
        properties: { spec: { type: "object", properties: { size: { type: "integer", default: "x" } } } },
      },
      [
        'properties[spec].properties[size].default: Invalid value: "string": spec.size in body must be of type integer: "string"',
      ],
    ],
    [
      "default with unknown fields",
      {
        type: "object",
        properties: { spec: { type: "object", default: { a: 1 }, properties: { b: { type: "integer" } } } },
      },
      ['properties[spec].default: Invalid value: map[string]interface {}{"a":1}: must not have unknown fields'],
    ],
    [
      "RE2 has no lookahead",
      { type: "object", properties: { a: { type: "string", pattern: "^(?!x)" } } },
      [
        'properties[a].pattern: Invalid value: "^(?!x)": must be a valid regular expression, but isn\'t: error parsing regexp: invalid or unsupported Perl syntax: `(?!`',
      ],
    ],
    [
      "metadata restricted",
      { type: "object", properties: { metadata: { type: "object", properties: { labels: { type: "object" } } } } },
      ["properties[metadata].properties[labels]: Forbidden: must not be specified"],
    ],
  ];
  it.each(cases)("%s", (_n, raw, want) => {
    let caught: unknown;
    try {
      compileSchema(raw);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SchemaError);
    expect((caught as SchemaError).errors.map(formatFieldError)).toEqual(want);
  });

  it("accepts int-or-string and preserve-unknown-fields nodes without a type", () => {
    expect(() =>
      compileSchema({
        type: "object",
        properties: { a: { "x-kubernetes-int-or-string": true }, b: { "x-kubernetes-preserve-unknown-fields": true } },
      }),
    ).not.toThrow();
  });
});

describe("listTypes", () => {
  const s = compileSchema({
    type: "object",
    properties: {
      status: {
        type: "object",
        properties: {
          conditions: {
            type: "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            items: { type: "object", required: ["type"], properties: { type: { type: "string" } } },
          },
        },
      },
      spec: {
        type: "object",
        properties: {
          tags: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" },
          plain: { type: "array", items: { type: "string" } },
        },
      },
    },
  });
  it.each([
    [["status", "conditions"], { type: "map", keys: ["type"] }],
    [["spec", "tags"], { type: "set" }],
    [["spec", "plain"], { type: "atomic" }],
    [["spec", "nope"], undefined],
  ])("%j", (path, want) => {
    expect(s.listTypes(path)).toEqual(want);
  });
});
