// The documentation stays true: the troubleshooting table covers every condition reason with the health the Argo CD
// scripts really give. Generated pages: test/docs/generated.test.ts; links, paths and names: test/docs/doc-references.test.ts.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { conditionReasons } from "../../src/resources/index.ts";
import { customizationsDir } from "./argocd-cm.ts";
import { requireLua, runHealthScript } from "./lua.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const read = (path: string) => readFile(join(repoRoot, path), "utf8");

describe("docs/troubleshooting.md", () => {
  let rows: Map<string, { condition: string; argo: string }>;

  beforeAll(async () => {
    requireLua();
    rows = new Map();
    for (const line of (await read("docs/troubleshooting.md")).split("\n")) {
      const m = /^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|/.exec(line);
      if (m?.[1] !== undefined && m[2] !== undefined && m[3] !== undefined) rows.set(m[1], { condition: m[2].trim(), argo: m[3].trim() });
    }
  });

  it("has a row for every condition reason the operator writes", () => {
    expect([...rows.keys()].sort()).toEqual(conditionReasons().map((r) => r.reason).sort());
  });

  it("states the Argo CD health that the health check really gives", () => {
    const script = join(customizationsDir, "mds.dev", "Database", "health.lua");
    const condition = (type: string, status: string, reason: string) => ({ type, status, reason, message: "m", lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1 });
    let checked = 0;
    for (const [reason, row] of rows) {
      const m = /^(Ready|Synced)=(True|False)$/.exec(row.condition);
      if (!m || !["Healthy", "Degraded", "Progressing", "Suspended"].includes(row.argo)) continue;
      const conditions = m[1] === "Ready" ? [condition("Ready", m[2] ?? "", reason)] : [condition("Ready", "False", "Creating"), condition("Synced", m[2] ?? "", reason)];
      const obj = { apiVersion: "mds.dev/v1alpha1", kind: "Database", metadata: { name: "d", generation: 1 }, status: { conditions } };
      expect({ reason, health: runHealthScript(script, obj).status }).toEqual({ reason, health: row.argo });
      checked++;
    }
    expect(checked).toBeGreaterThan(15);
  });
});

describe("links", () => {
  it("docs/e2e.md documents the variables that point the end-to-end suite at a real cluster", async () => {
    const text = await read("docs/e2e.md");
    for (const name of ["MDS_E2E_KUBECONFIG", "MDS_E2E_CONTEXT", "MDS_E2E_KEEP_NAMESPACES"]) expect(text).toContain(`\`${name}\``);
  });
});
