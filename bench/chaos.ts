// `npm run chaos -- --iterations N [--seed S] [--crashes-per-step K] [--replicas 1|2|random] [--no-faults] [--keep]
//    [--api service|emulator] [--lose-responses 0.05]`
// `npm run chaos -- --storm --iterations N [--databases 10] [--kills-per-phase 10]`: crash storms (see runCrashStorm).
// `npm run chaos -- --upgrade --iterations N [--api service|emulator|both]`: the operator alternates between the previous
//    release (built from git history) and this tree at every restart and every iteration (default: both counterparts).
// `--minutes M` on either: no new iteration after M minutes (per counterpart).
// Runs chaos iterations on the local stack (see test/support/chaos/run.ts) and prints a table and
// the final line `chaos: N iterations, K crashes injected, V invariant violations`; exits 1 when V > 0.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { crashPoints } from "../src/resources/index.ts";
import { formatReport, runChaos, runCrashStorm, tableHeader } from "../test/support/chaos/run.ts";
import { startChaosStack } from "../test/support/chaos/stack.ts";
import { prepareReleases, type Releases } from "../test/support/chaos/versions.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "5" },
    seed: { type: "string", default: "1" },
    /** Default: every crash point of each step, armed together. */
    "crashes-per-step": { type: "string", default: "all" },
    "step-timeout": { type: "string", default: "90" },
    "no-faults": { type: "boolean", default: false },
    replicas: { type: "string", default: "random" },
    storm: { type: "boolean", default: false },
    minutes: { type: "string" },
    databases: { type: "string", default: "10" },
    "kills-per-phase": { type: "string", default: "10" },
    keep: { type: "boolean", default: false },
    /**
     * service, emulator (the public-API emulator in front of the service: no replay, public codes) or both, one
     * after the other. Default: service, both with --upgrade.
     */
    api: { type: "string" },
    upgrade: { type: "boolean", default: false },
    /** With --api emulator: the share of write responses lost after the server acted. */
    "lose-responses": { type: "string", default: "0.05" },
  },
});
const api = values.api ?? (values.upgrade ? "both" : "service");
if (api !== "service" && api !== "emulator" && api !== "both")
  throw new Error(`--api must be service, emulator or both, got "${api}"`);
if (values.upgrade && values.storm) throw new Error("--upgrade runs lifecycle iterations, not --storm");
const counterparts: ("service" | "emulator")[] = api === "both" ? ["service", "emulator"] : [api];
const loseResponse = Number(values["lose-responses"]);
if (!(loseResponse >= 0 && loseResponse < 1))
  throw new Error(`--lose-responses must be in [0, 1), got "${values["lose-responses"]}"`);

const iterations = Number(values.iterations);
const seed = Number(values.seed);
if (!Number.isInteger(iterations) || iterations < 1)
  throw new Error(`--iterations must be a positive integer, got "${values.iterations}"`);
if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got "${values.seed}"`);

const runFor = async (counterpart: "service" | "emulator"): Promise<number> => {
  // --minutes: start no new iteration after that long (the report counts the iterations that ran).
  const deadline = values.minutes === undefined ? undefined : Date.now() + Number(values.minutes) * 60_000;
  const dir = await mkdtemp(path.join(tmpdir(), "mds-chaos-"));
  console.log(
    `chaos${values.upgrade ? " across upgrades" : ""}: ${iterations} iterations, seed ${seed}, against ${counterpart}, state in ${dir}`,
  );
  const stack = await startChaosStack({
    dir,
    api: counterpart,
    ...(counterpart === "emulator" && !values["no-faults"] ? { emulatorFaults: { loseResponse, seed } } : {}),
  });
  let releases: Releases | undefined;
  try {
    if (values.upgrade) {
      releases = await prepareReleases(dir, stack.devkube.kubeconfigPath);
      console.log(`versions: ${releases.previous.version} (git history) and ${releases.current.version} (this tree)`);
    }
    console.log(`crash points: ${crashPoints().join(", ")}`);
    console.log(tableHeader);
    const report = values.storm
      ? await runCrashStorm(stack, {
          iterations,
          seed,
          databases: Number(values.databases),
          killsPerPhase: Number(values["kills-per-phase"]),
          stepTimeoutMs: Number(values["step-timeout"]) * 1000 * 2,
          ...(deadline === undefined ? {} : { deadline }),
          log: (line) => console.log(line),
        })
      : await runChaos(stack, {
          iterations,
          seed,
          crashesPerStep: values["crashes-per-step"] === "all" ? Infinity : Number(values["crashes-per-step"]),
          stepTimeoutMs: Number(values["step-timeout"]) * 1000,
          faults: !values["no-faults"],
          replicas: values.replicas === "1" ? 1 : values.replicas === "2" ? 2 : "random",
          ...(deadline === undefined ? {} : { deadline }),
          ...(releases === undefined ? {} : { releases }),
          log: (line) => console.log(line),
        });
    console.log("");
    console.log(formatReport(report));
    if (stack.emulator)
      console.log(
        `public-API emulator: ${stack.emulator.stats.requests} requests, ${stack.emulator.stats.lost} responses lost after acting, ${stack.emulator.stats.errors} 5xx`,
      );
    return report.violations;
  } finally {
    await stack.stop();
    await releases?.remove();
    if (!values.keep) await rm(dir, { recursive: true, force: true });
    else console.log(`kept ${dir}`);
  }
};

let violations = 0;
for (const counterpart of counterparts) violations += await runFor(counterpart);
if (counterparts.length > 1)
  console.log(`chaos against ${counterparts.join(" and ")}: ${violations} invariant violations`);
process.exit(violations > 0 ? 1 : 0);
