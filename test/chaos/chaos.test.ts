import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkInvariants, mdsApiVersion } from "../support/chaos/invariants.ts";
import { formatReport, runChaos } from "../support/chaos/run.ts";
import { stepOf } from "../support/chaos/crash-points.ts";
import type { KubeObject } from "../support/kube-objects.ts";
import { startChaosStack, type ChaosStack } from "../support/chaos/stack.ts";

// A short chaos run inside `npm test`: one full lifecycle (create, update, Secret rebuild, restore,
// delete) with a crash at every named point each step passes, random SIGKILLs, API faults and dropped watches,
// then every invariant. `npm run chaos -- --iterations N` runs the long version.

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

describe("chaos against the public-API emulator", () => {
  // No Idempotency-Key replay, public codes and nulls, foreign objects, and a quarter of write answers lost after the
  // server acted: no duplicate, no second restore, no revoked or never-issued credentials, every finalizer done.
  it("keeps every invariant through crashes, lost responses and API faults", { timeout: 300_000 }, async () => {
    const emulatorDir = await mkdtemp(path.join(tmpdir(), "mds-chaos-emulator-"));
    const emulated = await startChaosStack({
      dir: emulatorDir,
      api: "emulator",
      emulatorFaults: { loseResponse: 0.25, seed: 7 },
    });
    try {
      const lines: string[] = [];
      // Three seeded crash points per step: the run without the emulator below crashes at every one.
      const report = await runChaos(emulated, {
        iterations: 1,
        seed: 11,
        replicas: 1,
        crashesPerStep: 3,
        stepTimeoutMs: 60_000,
        log: (l) => lines.push(l),
      });
      const text = formatReport(report);
      expect(report.violations, `${lines.join("\n")}\n${text}`).toBe(0);
      expect(text).toMatch(/^chaos: 1 iterations, \d+ crashes injected, 0 invariant violations$/m);
      expect(emulated.emulator!.stats.lost, "responses lost after the server acted").toBeGreaterThan(0);
    } finally {
      await emulated.stop();
      await rm(emulatorDir, { recursive: true, force: true });
    }
  });
});

describe("chaos", () => {
  it("keeps every invariant through crashes, API faults and dropped watches", { timeout: 300_000 }, async () => {
    const lines: string[] = [];
    const report = await runChaos(stack, {
      iterations: 1,
      seed: 11,
      replicas: 1,
      stepTimeoutMs: 60_000,
      log: (l) => lines.push(l),
    });
    const text = formatReport(report);
    expect(report.violations, `${lines.join("\n")}\n${text}`).toBe(0);
    // Every step is crashed at its named points; a point the step passed before its process was armed is "not
    // reached", which a fault or a random kill can cause, so the test asks for most of them, not all.
    const hits = Object.values(report.crashPointsHit).reduce((a, b) => a + b, 0);
    expect(hits, text).toBeGreaterThanOrEqual(10);
    expect(
      Object.keys(report.crashPointsHit)
        .map((p) => stepOf(p))
        .sort(),
      text,
    ).toEqual(expect.arrayContaining(["create", "delete", "restore", "rotate", "secret", "update"]));
    expect(text).toMatch(/^chaos: 1 iterations, \d+ crashes injected, 0 invariant violations$/m);
  });
});

describe("the invariant checks", () => {
  it("catch a planted stuck finalizer and a planted leak, without printing the secret", async () => {
    const ns = "chaos-selftest";
    const kube = stack.kube;
    await kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    await kube.apply({
      apiVersion: mdsApiVersion,
      kind: "Database",
      metadata: {
        name: "held",
        namespace: ns,
        finalizers: ["chaos.test/hold"],
        annotations: { "mds.dev/paused": "true" },
      },
      spec: { projectRef: { name: "nowhere" } },
    });
    await kube.remove(mdsApiVersion, "Database", ns, "held");
    const event = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "leak", namespace: ns },
      involvedObject: { apiVersion: mdsApiVersion, kind: "Database", name: "held", namespace: ns },
      reason: "Leak",
      type: "Normal",
      message: `connected with token ${stack.api.token}`,
    } as KubeObject;
    await kube.apply(event);
    try {
      const violations = await checkInvariants({
        kube,
        controlUrl: stack.controlUrl,
        api: { url: stack.api.directUrl, token: stack.api.token },
        namespaces: [ns],
        instanceId: stack.instanceId,
        logFiles: [],
        planted: stack.planted,
      });
      const kinds = violations.map((v) => v.invariant).sort();
      expect(kinds).toEqual(["no-secret-leak", "no-stuck-finalizer"]);
      expect(JSON.stringify(violations)).toContain(`event ${ns}/leak`);
      expect(JSON.stringify(violations)).not.toContain(stack.api.token);
    } finally {
      await kube.mergePatch(mdsApiVersion, "Database", ns, "held", { metadata: { finalizers: null } });
      await kube.remove("v1", "Event", ns, "leak");
    }
  });
});
