import { describe, expect, it } from "vitest";
import { builtinResourceTypes } from "./builtins.ts";
import { ApiError } from "./errors.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";

const obj = (labels: Record<string, string>) => ({ metadata: { name: "n1", namespace: "ns1", labels } });
const secrets = builtinResourceTypes().find((t) => t.plural === "secrets");

describe("label selectors", () => {
  it.each([
    ["app=demo", { app: "demo" }, true],
    ["app==demo", { app: "demo" }, true],
    ["app!=demo", { app: "demo" }, false],
    ["app!=demo", {}, true],
    ["app in (demo,x)", { app: "x" }, true],
    ["app notin (demo,x)", { app: "demo" }, false],
    ["app notin (demo,x)", {}, true],
    ["app", { app: "" }, true],
    ["!app", { app: "" }, false],
    ["app=demo,tier", { app: "demo" }, false],
    ["example.com/role=db", { "example.com/role": "db" }, true],
  ])("%s on %j → %s", (sel, labels, want) => {
    expect(parseLabelSelector(sel)?.(obj(labels))).toBe(want);
  });

  it("rejects malformed selectors with 400", () => {
    expect(() => parseLabelSelector("app in (")).toThrow(ApiError);
    expect(() => parseLabelSelector("a=b=c")).toThrow(ApiError);
  });
});

describe("field selectors", () => {
  it("supports metadata fields and kind extras, rejects others", () => {
    if (!secrets) throw new Error("no secrets type");
    expect(parseFieldSelector("metadata.name=n1,metadata.namespace!=x", secrets)?.(obj({}))).toBe(true);
    expect(parseFieldSelector("type=Opaque", secrets)?.({ ...obj({}), type: "Opaque" })).toBe(true);
    expect(() => parseFieldSelector("data.x=1", secrets)).toThrow(/field label not supported: data.x/);
  });
});
