// Lists kept by hand beside the registry (src/resources/index.ts) name every kind it has: a kind added to the
// registry and forgotten elsewhere fails here, not in a scan that silently skips it.
import { describe, expect, it } from "vitest";
import { mdsCustomResources } from "../../test/support/secret-scan.ts";
import { group, version } from "./group.ts";
import { kindModules } from "./index.ts";
import * as types from "./types.ts";

const registry = kindModules
  .map((k) => ({ kind: k.definition.kind, plural: k.definition.plural }))
  .sort((a, b) => a.kind.localeCompare(b.kind));

describe("the kind registry and the lists beside it", () => {
  it("types.ts gives every kind's address, as its definition names it", () => {
    const addresses = Object.values(types)
      .map((t) => ({ kind: t.kind, plural: t.plural, group: t.group, version: t.version, namespaced: t.namespaced }))
      .sort((a, b) => a.kind.localeCompare(b.kind));
    expect(addresses).toEqual(registry.map((k) => ({ ...k, group, version, namespaced: true })));
  });

  it("the secret scan reads every kind, connections included", () => {
    expect(mdsCustomResources.map((r) => r.plural).sort()).toEqual(registry.map((k) => k.plural).sort());
    expect(mdsCustomResources.map((r) => r.plural)).toContain("connections");
  });
});
