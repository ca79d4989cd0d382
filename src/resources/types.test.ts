import { describe, expect, it } from "vitest";
import { mdsCustomResources } from "../../test/support/secret-scan.ts";
import { kindModules } from "./index.ts";
import * as types from "./types.ts";

// Hand lists of kinds drift when a kind is added; these tie them to the registry.
describe("lists of kinds follow the registry", () => {
  const registered = kindModules.map((k) => k.definition.kind).sort();

  it("types.ts exports an address for every registered kind, and only those", () => {
    expect(
      Object.values(types)
        .map((t) => t.kind)
        .sort(),
    ).toEqual(registered);
    for (const t of Object.values(types)) {
      expect(kindModules.find((k) => k.definition.kind === t.kind)?.definition.plural).toBe(t.plural);
    }
  });

  it("the secret scan reads every registered kind", () => {
    expect(mdsCustomResources.map((r) => r.plural).sort()).toEqual(kindModules.map((k) => k.definition.plural).sort());
  });
});
