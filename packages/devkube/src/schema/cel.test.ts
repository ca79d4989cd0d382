import { describe, expect, it } from "vitest";
import { SchemaError, compileSchema, formatFieldError, invalidStatus } from "./index.ts";

// The rules the mds operator's CRDs use, plus Kubernetes library functions.
const schema = compileSchema({
  type: "object",
  properties: {
    spec: {
      type: "object",
      "x-kubernetes-validations": [
        {
          rule: "has(self.projectRef) != has(self.projectId)",
          message: "exactly one of projectRef or projectId must be set",
        },
        {
          rule: "!has(oldSelf.externalId) || self.externalId == oldSelf.externalId",
          message: "externalId is immutable once set",
        },
      ],
      properties: {
        projectRef: { type: "string" },
        projectId: { type: "string" },
        externalId: { type: "string" },
        region: {
          type: "string",
          "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "region is immutable" }],
        },
        size: {
          type: "integer",
          "x-kubernetes-validations": [
            { rule: "self + 1 <= 10", messageExpression: "'size ' + string(self) + ' is too large'" },
          ],
        },
        tags: {
          type: "array",
          items: { type: "string" },
          "x-kubernetes-validations": [
            { rule: "self.isSorted()", message: "tags must be sorted", reason: "FieldValueForbidden" },
          ],
        },
        name: {
          type: "string",
          "x-kubernetes-validations": [
            { rule: "self.lowerAscii() == self", message: "must be lower case" },
            { rule: "self.matches('^[a-z]')" },
          ],
        },
        limits: {
          type: "object",
          properties: { min: { type: "integer" }, max: { type: "integer" } },
          "x-kubernetes-validations": [
            { rule: "self.min <= self.max", message: "min must not exceed max", fieldPath: ".min" },
          ],
        },
      },
    },
  },
});

const base = { apiVersion: "mds.dev/v1alpha1", kind: "Database", metadata: { name: "d" } };
const obj = (spec: Record<string, unknown>): Record<string, unknown> => ({
  ...base,
  spec: { projectId: "p", ...spec },
});
const fmt = (errs: ReturnType<typeof schema.validate>): string[] => errs.map(formatFieldError);

describe("x-kubernetes-validations", () => {
  const createCases: [string, Record<string, unknown>, string[]][] = [
    ["valid", obj({ region: "eu", size: 3, tags: ["a", "b"], name: "abc", limits: { min: 1, max: 2 } }), []],
    [
      "exactly one of (none)",
      { ...base, spec: {} },
      ['spec: Invalid value: "object": exactly one of projectRef or projectId must be set'],
    ],
    [
      "exactly one of (both)",
      obj({ projectRef: "r" }),
      ['spec: Invalid value: "object": exactly one of projectRef or projectId must be set'],
    ],
    [
      "integers are CEL int + messageExpression",
      obj({ size: 10 }),
      ['spec.size: Invalid value: "integer": size 10 is too large'],
    ],
    ["isSorted with reason Forbidden", obj({ tags: ["b", "a"] }), ["spec.tags: Forbidden: tags must be sorted"]],
    [
      "default message",
      obj({ name: "1a" }),
      ["spec.name: Invalid value: \"string\": failed rule: self.matches('^[a-z]')"],
    ],
    ["lowerAscii", obj({ name: "aB" }), ['spec.name: Invalid value: "string": must be lower case']],
    [
      "fieldPath",
      obj({ limits: { min: 3, max: 2 } }),
      ['spec.limits.min: Invalid value: "object": min must not exceed max'],
    ],
    [
      "missing key is a runtime error",
      obj({ limits: { min: 3 } }),
      ['spec.limits: Invalid value: "object": no such key: max evaluating rule: min must not exceed max'],
    ],
  ];
  it.each(createCases)("create: %s", (_n, o, want) => {
    expect(fmt(schema.validate(o))).toEqual(want);
  });

  it("keys additionalProperties values as [key] in CEL errors, and orders schema, list-type, then CEL errors", () => {
    const s = compileSchema({
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: {
            m: {
              type: "object",
              additionalProperties: {
                type: "string",
                maxLength: 1,
                "x-kubernetes-validations": [{ rule: "self != 'bad'" }],
              },
            },
            l: {
              type: "array",
              "x-kubernetes-list-type": "set",
              items: { type: "string" },
              "x-kubernetes-validations": [{ rule: "size(self) < 2", message: "too many" }],
            },
          },
        },
      },
    });
    expect(fmt(s.validate({ spec: { m: { k: "bad" }, l: ["a", "a"] } }))).toEqual([
      "spec.m.k: Too long: may not be more than 1 byte",
      'spec.l[1]: Duplicate value: "a"',
      "spec.m[k]: Invalid value: \"string\": failed rule: self != 'bad'",
      'spec.l: Invalid value: "array": too many',
    ]);
  });

  it("reports runtime overload errors like cel-go", () => {
    const s = compileSchema({
      type: "object",
      properties: { p: { "x-kubernetes-int-or-string": true, "x-kubernetes-validations": [{ rule: "self + 1 > 0" }] } },
    });
    expect(fmt(s.validate({ p: "x" }))[0]).toMatch(
      /^p: Invalid value: "": '.*overload.*': call arguments did not match a supported operator, function or macro signature for rule: self \+ 1 > 0$/,
    );
  });

  it("ratchets items of atomic lists through their unchanged parent", () => {
    const s = compileSchema({
      type: "object",
      properties: {
        l: {
          type: "array",
          items: { type: "string", "x-kubernetes-validations": [{ rule: "self.size() < 3", message: "short" }] },
        },
      },
    });
    expect(fmt(s.validate({ l: ["long"] }, { l: ["long"] }))).toEqual([]);
    expect(fmt(s.validate({ l: ["long", "x"] }, { l: ["long"] }))).toEqual(['l[0]: Invalid value: "string": short']);
  });

  it("skips transition rules on create and when the old value is absent", () => {
    expect(fmt(schema.validate(obj({ region: "eu", externalId: "x" })))).toEqual([]);
    expect(fmt(schema.validate(obj({ region: "eu" }), obj({})))).toEqual([]);
  });

  it("recognises a transition rule whose only oldSelf is inside has()", () => {
    const s = compileSchema({
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: { secret: { type: "string" } },
          "x-kubernetes-validations": [
            { rule: "has(self.secret) == has(oldSelf.secret)", message: "secret cannot be added or removed" },
          ],
        },
      },
    });
    expect(fmt(s.validate({ spec: { secret: "a" } }))).toEqual([]);
    expect(fmt(s.validate({ spec: {} }, { spec: { secret: "a" } }))).toEqual([
      'spec: Invalid value: "object": secret cannot be added or removed',
    ]);
  });

  it("evaluates transition rules with oldSelf on update", () => {
    expect(fmt(schema.validate(obj({ region: "us" }), obj({ region: "eu" })))).toEqual([
      'spec.region: Invalid value: "string": region is immutable',
    ]);
    expect(fmt(schema.validate(obj({ region: "eu" }), obj({ region: "eu" })))).toEqual([]);
    expect(fmt(schema.validate(obj({ externalId: "b" }), obj({ externalId: "a" })))).toEqual([
      'spec: Invalid value: "object": externalId is immutable once set',
    ]);
    expect(fmt(schema.validate(obj({ externalId: "a" }), obj({})))).toEqual([]);
  });

  it("optionalOldSelf: the rule also runs on create, with oldSelf an optional", () => {
    const s = compileSchema({
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: { tier: { type: "string" } },
          "x-kubernetes-validations": [
            {
              rule: "!oldSelf.hasValue() || oldSelf.value().tier == 'paid' || self.tier == oldSelf.value().tier",
              optionalOldSelf: true,
              message: "free tier cannot change",
            },
          ],
        },
      },
    });
    expect(fmt(s.validate({ spec: { tier: "free" } }))).toEqual([]);
    expect(fmt(s.validate({ spec: { tier: "paid" } }, { spec: { tier: "free" } }))).toEqual([
      'spec: Invalid value: "object": free tier cannot change',
    ]);
    expect(fmt(s.validate({ spec: { tier: "free" } }, { spec: { tier: "paid" } }))).toEqual([]);
  });

  it("ratchets non-transition rules on unchanged values", () => {
    const old = obj({ tags: ["b", "a"] });
    expect(fmt(schema.validate(obj({ tags: ["b", "a"], region: "eu" }), old))).toEqual([]);
  });

  it("invalidStatus renders the 422 like kube-apiserver", () => {
    const errs = schema.validate(obj({ region: "us", size: 10 }), obj({ region: "eu", size: 1 }));
    const status = invalidStatus("Database", "mds.dev", "d", errs);
    expect(status).toMatchObject({
      kind: "Status",
      code: 422,
      reason: "Invalid",
      message:
        'Database.mds.dev "d" is invalid: [spec.region: Invalid value: "string": region is immutable, spec.size: Invalid value: "integer": size 10 is too large]',
      details: {
        name: "d",
        group: "mds.dev",
        kind: "Database",
        causes: [
          {
            reason: "FieldValueInvalid",
            message: 'Invalid value: "string": region is immutable',
            field: "spec.region",
          },
          {
            reason: "FieldValueInvalid",
            message: 'Invalid value: "integer": size 10 is too large',
            field: "spec.size",
          },
        ],
      },
    });
    expect(invalidStatus("ConfigMap", "", "c", errs.slice(0, 1))["message"]).toBe(
      'ConfigMap "c" is invalid: spec.region: Invalid value: "string": region is immutable',
    );
  });

  it("binds self at the root with only metadata.name/generateName", () => {
    const s = compileSchema({
      type: "object",
      "x-kubernetes-validations": [
        {
          rule: "self.metadata.name.startsWith('db-') && !has(self.metadata.labels)",
          message: "name must start with db-",
        },
      ],
      properties: { spec: { type: "object" } },
    });
    expect(fmt(s.validate({ metadata: { name: "db-1", labels: { a: "b" } } }))).toEqual([]);
    expect(fmt(s.validate({ metadata: { name: "x" } }))).toEqual([
      '<nil>: Invalid value: "object": name must start with db-',
    ]);
  });
});

describe("CEL compile errors reject the schema", () => {
  it("names the undeclared field like cel-go", () => {
    try {
      compileSchema({
        type: "object",
        properties: {
          spec: {
            type: "object",
            properties: { a: { type: "string" } },
            "x-kubernetes-validations": [{ rule: "self.b == 'x'" }],
          },
        },
      });
      expect.unreachable();
    } catch (err) {
      expect((err as SchemaError).errors.map(formatFieldError)).toEqual([
        "properties[spec].x-kubernetes-validations[0].rule: Invalid value: " +
          'apiextensions.ValidationRule{Rule:"self.b == \'x\'", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: ' +
          "compilation failed: ERROR: <input>:1:5: undefined field 'b'\n | self.b == 'x'\n | ....^",
      ]);
    }
  });

  it("accepts selects into maps, preserved fields, list items and comprehension variables", () => {
    expect(() =>
      compileSchema({
        type: "object",
        "x-kubernetes-validations": [
          {
            rule: "self.metadata.name != '' && self.spec.m.anything == 'x' && self.spec.free.deep.er && self.spec.l.all(i, i.n > 0) && self.spec.l[0].n > 0",
          },
        ],
        properties: {
          spec: {
            type: "object",
            properties: {
              m: { type: "object", additionalProperties: { type: "string" } },
              free: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              l: { type: "array", items: { type: "object", properties: { n: { type: "integer" } } } },
            },
          },
        },
      }),
    ).not.toThrow();
  });

  it.each([
    ["syntax", { rule: "self ==" }, "x-kubernetes-validations[0].rule"],
    ["unknown function", { rule: "self.nope()" }, "x-kubernetes-validations[0].rule"],
    ["non-bool", { rule: "'a'" }, "x-kubernetes-validations[0].rule"],
    ["undeclared field", { rule: "has(self.projctId)" }, "x-kubernetes-validations[0].rule"],
    ["undeclared nested field", { rule: "self.a.nope == 1" }, "x-kubernetes-validations[0].rule"],
    ["bad reason", { rule: "true", reason: "Nope" }, "x-kubernetes-validations[0].reason"],
    [
      "optionalOldSelf without oldSelf",
      { rule: "true", optionalOldSelf: true },
      "x-kubernetes-validations[0].optionalOldSelf",
    ],
  ])("%s", (_n, rule, field) => {
    try {
      compileSchema({
        type: "object",
        properties: {
          spec: {
            type: "object",
            properties: { a: { type: "object", properties: { b: { type: "integer" } } } },
            "x-kubernetes-validations": [rule],
          },
        },
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(SchemaError);
      expect((err as SchemaError).errors.map((e) => e.field)).toEqual([`properties[spec].${field}`]);
    }
  });
});
