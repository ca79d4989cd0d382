import { describe, expect, it } from "vitest";
import { compileSchema, formatFieldError } from "./index.ts";

const schema = compileSchema({
  type: "object",
  properties: {
    spec: {
      type: "object",
      required: ["name"],
      properties: {
        name: { type: "string", minLength: 3, maxLength: 8, pattern: "^[a-z]+$" },
        replicas: { type: "integer", minimum: 1, maximum: 10 },
        ratio: { type: "number", exclusiveMaximum: true, maximum: 1 },
        deletionPolicy: { type: "string", enum: ["Retain", "Delete"] },
        port: { "x-kubernetes-int-or-string": true },
        when: { type: "string", format: "date-time" },
        note: { type: "string", nullable: true },
        tags: { type: "array", items: { type: "string" }, maxItems: 2, "x-kubernetes-list-type": "set" },
        ports: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          items: {
            type: "object",
            required: ["name"],
            properties: { name: { type: "string" }, port: { type: "integer" } },
          },
        },
        labels: { type: "object", additionalProperties: { type: "string" }, maxProperties: 2 },
        flag: { type: "boolean" },
      },
    },
  },
});

const ok = { apiVersion: "mds.dev/v1alpha1", kind: "Database", metadata: { name: "d" }, spec: { name: "orders" } };
const withSpec = (spec: Record<string, unknown>): Record<string, unknown> => ({
  ...ok,
  spec: { name: "orders", ...spec },
});

describe("validate: kube-openapi checks worded like kube-apiserver", () => {
  it("accepts a valid object", () => {
    expect(schema.validate(ok)).toEqual([]);
  });
  const cases: [string, Record<string, unknown>, string[]][] = [
    ["required", { ...ok, spec: {} }, ["spec.name: Required value"]],
    [
      "type integer",
      withSpec({ replicas: "3" }),
      ['spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'],
    ],
    [
      "float for integer",
      withSpec({ replicas: 1.5 }),
      ['spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number"'],
    ],
    [
      "null non-nullable",
      withSpec({ replicas: null }),
      ['spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null"'],
    ],
    ["null nullable", withSpec({ note: null }), []],
    [
      "enum",
      withSpec({ deletionPolicy: "Nope" }),
      ['spec.deletionPolicy: Unsupported value: "Nope": supported values: "Retain", "Delete"'],
    ],
    [
      "maximum",
      withSpec({ replicas: 11 }),
      ["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"],
    ],
    [
      "minimum",
      withSpec({ replicas: 0 }),
      ["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"],
    ],
    [
      "exclusive maximum",
      withSpec({ ratio: 1 }),
      ["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"],
    ],
    ["number accepts integer", withSpec({ ratio: 0 }), []],
    ["maxLength", withSpec({ name: "abcdefghi" }), ["spec.name: Too long: may not be more than 8 bytes"]],
    [
      "minLength",
      withSpec({ name: "ab" }),
      ['spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long'],
    ],
    [
      "pattern",
      withSpec({ name: "ABC" }),
      ["spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'"],
    ],
    ["int-or-string int", withSpec({ port: 80 }), []],
    ["int-or-string string", withSpec({ port: "http" }), []],
    [
      "int-or-string bool",
      withSpec({ port: true }),
      ['spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'],
    ],
    [
      "format date-time",
      withSpec({ when: "yesterday" }),
      ['spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"'],
    ],
    ["format ok", withSpec({ when: "2026-11-21T08:13:31Z" }), []],
    ["maxItems", withSpec({ tags: ["a", "b", "c"] }), ["spec.tags: Too many: 3: must have at most 2 items"]],
    ["set duplicate", withSpec({ tags: ["a", "a"] }), ['spec.tags[1]: Duplicate value: "a"']],
    [
      "map list duplicate",
      withSpec({
        ports: [
          { name: "a", port: 1 },
          { name: "a", port: 2 },
        ],
      }),
      ['spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}'],
    ],
    [
      "item field",
      withSpec({ ports: [{ name: "a", port: "x" }] }),
      ['spec.ports[0].port: Invalid value: "string": spec.ports[0].port in body must be of type integer: "string"'],
    ],
    ["item required", withSpec({ ports: [{ port: 1 }] }), ["spec.ports[0].name: Required value"]],
    [
      "additionalProperties",
      withSpec({ labels: { a: 1 } }),
      ['spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer"'],
    ],
    [
      "maxProperties",
      withSpec({ labels: { a: "1", b: "2", c: "3" } }),
      ["spec.labels: Too many: 3: must have at most 2 items"],
    ],
    [
      "boolean",
      withSpec({ flag: "yes" }),
      ['spec.flag: Invalid value: "string": spec.flag in body must be of type boolean: "string"'],
    ],
    [
      "object type",
      { ...ok, spec: "x" },
      ['spec: Invalid value: "string": spec in body must be of type object: "string"'],
    ],
  ];
  it.each(cases)("%s", (_name, obj, want) => {
    expect(schema.validate(obj).map(formatFieldError)).toEqual(want);
  });

  it("gives each error kube's cause message (ErrorBody) and the bare detail", () => {
    expect(schema.validate(withSpec({ replicas: "3" }))).toEqual([
      {
        type: "FieldValueTypeInvalid",
        field: "spec.replicas",
        message: 'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        detail: 'spec.replicas in body must be of type integer: "string"',
        badValue: "string",
      },
    ]);
  });

  it("reports every error, with kube's error types", () => {
    const errs = schema.validate(
      withSpec({ replicas: "x", deletionPolicy: "Nope", tags: ["a", "b", "c"], name: "abcdefghij" }),
    );
    expect(errs.map((e) => e.type).sort()).toEqual([
      "FieldValueNotSupported",
      "FieldValueTooLong",
      "FieldValueTooMany",
      "FieldValueTypeInvalid",
    ]);
  });

  it("ratchets: an unchanged invalid value is accepted on update, a changed one is not", () => {
    const old = withSpec({ replicas: 50 });
    expect(schema.validate(withSpec({ replicas: 50, flag: true }), old)).toEqual([]);
    expect(schema.validate(withSpec({ replicas: 51 }), old).map(formatFieldError)).toEqual([
      "spec.replicas: Invalid value: 51: spec.replicas in body should be less than or equal to 10",
    ]);
  });
});

describe("validate: embedded resources", () => {
  const s = compileSchema({
    type: "object",
    properties: {
      tpl: { type: "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true },
    },
  });
  it.each([
    [{ apiVersion: "v1", kind: "ConfigMap", data: {} }, []],
    [
      { data: {} },
      ["tpl.apiVersion: Required value: must not be empty", "tpl.kind: Required value: must not be empty"],
    ],
    [
      { apiVersion: "", kind: 3 },
      ['tpl.apiVersion: Invalid value: "": must not be empty', "tpl.kind: Invalid value: 3: must be a string"],
    ],
  ])("%j", (tpl, want) => {
    expect(s.validate({ tpl }).map(formatFieldError)).toEqual(want);
  });
});

describe("validate: junctors", () => {
  const s = compileSchema({
    type: "object",
    properties: {
      spec: {
        type: "object",
        properties: { a: { type: "string" }, b: { type: "string" } },
        oneOf: [{ required: ["a"] }, { required: ["b"] }],
      },
    },
  });
  it.each([
    [{ a: "x" }, []],
    [
      { a: "x", b: "y" },
      [
        'spec: Invalid value: map[string]interface {}{"a":"x", "b":"y"}: spec in body must validate one and only one schema (oneOf)',
      ],
    ],
  ])("%j", (spec, want) => {
    expect(s.validate({ spec }).map(formatFieldError)).toEqual(want);
  });
});
