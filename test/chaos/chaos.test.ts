import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatReport, runChaos } from "../../src/testing/chaos-run.ts";
import { startChaosStack, type ChaosStack } from "../../src/testing/chaos-stack.ts";

// A short chaos run inside `npm test`: one full lifecycle (create, update, Secret rebuild, restore,
// delete) with crashes at named points, random SIGKILLs, API faults and dropped watches, then every
// invariant. `npm run chaos -- --iterations N` runs the long version.

let dir: string;
let stack: ChaosStack;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "mds-chaos-test-"));
  stack = await startChaosStack({ dir });
});

afterAll(async () => {
  await stack?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("chaos", () => {
  it("keeps every invariant through crashes, API faults and dropped watches", { timeout: 300_000 }, async () => {
    const lines: string[] = [];
    const report = await runChaos(stack, { iterations: 1, seed: 11, crashesPerStep: 1, stepTimeoutMs: 60_000, log: (l) => lines.push(l) });
    const text = formatReport(report);
    expect(report.violations, `${lines.join("\n")}\n${text}`).toBe(0);
    expect(report.crashes).toBeGreaterThan(0);
    expect(text).toMatch(/^chaos: 1 iterations, \d+ crashes injected, 0 invariant violations$/m);
  });
});
