import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatReport, runChaos } from "../support/chaos/run.ts";
import { startChaosStack, type ChaosStack } from "../support/chaos/stack.ts";
import { prepareReleases, type Releases } from "../support/chaos/versions.ts";

// The short run of `npm run chaos -- --upgrade` inside `npm test`: one lifecycle whose operator alternates between
// the previous release (built from git history) and this tree at every restart, while it is killed at every crash
// point of its steps. A crash of one version is recovered by the other, both ways: no duplicate, no lost or
// never-issued credentials, every finalizer done. Against our service, which replays an Idempotency-Key, the steps are
// those where the two versions' keys differ (create, Secret rebuild, rotation: 0.1.0's lack the object's uid) and
// deletion; the public-API emulator replays none, so creation and deletion there (under lost answers) keep the run
// near a minute. The long run: docs/crash-points.md.

const runs = [
  { api: "service", steps: ["create", "secret", "rotate", "delete"] },
  { api: "emulator", steps: ["create", "delete"] },
] as const;

describe.each(runs)("chaos across upgrades against $api", ({ api, steps }) => {
  let dir: string;
  let stack: ChaosStack;
  let releases: Releases;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), `mds-chaos-upgrade-${api}-`));
    stack = await startChaosStack({
      dir,
      api,
      ...(api === "emulator" ? { emulatorFaults: { loseResponse: 0.1, seed: 5 } } : {}),
    });
    releases = await prepareReleases(dir, stack.devkube.kubeconfigPath);
  });

  afterAll(async () => {
    await stack?.stop();
    await releases?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps every invariant when each crash is recovered by the other version", { timeout: 240_000 }, async () => {
    const lines: string[] = [];
    const report = await runChaos(stack, {
      iterations: 1,
      seed: 3,
      replicas: 1,
      steps: [...steps],
      stepTimeoutMs: 60_000,
      releases,
      log: (l) => lines.push(l),
    });
    const text = formatReport(report);
    expect(report.violations, `${lines.join("\n")}\n${text}`).toBe(0);
    expect(text).toMatch(/^chaos: 1 iterations, \d+ crashes injected, 0 invariant violations$/m);
    const [run] = report.iterations;
    const { previous, current } = releases;
    // Both versions ran, and crash points of each were recovered by the other.
    expect(Object.keys(run?.launches ?? {}).sort(), text).toEqual([previous.version, current.version].sort());
    expect(run?.handovers?.[`${previous.version} -> ${current.version}`] ?? 0, text).toBeGreaterThan(0);
    expect(run?.handovers?.[`${current.version} -> ${previous.version}`] ?? 0, text).toBeGreaterThan(0);
    // The upgrade went as docs/upgrade.md has it: this tree's CRDs came with its operator and stayed for the rollbacks.
    expect(releases.crdsVersion()).toBe(current.version);
  });
});
