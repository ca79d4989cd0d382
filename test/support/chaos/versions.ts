import { mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import { crashPoints } from "../../../src/resources/index.ts";
import { runKubectl } from "../kubectl.ts";
import { buildPreviousRelease, crashPointsOf, currentVersion, previousRelease, repoRoot } from "../previous-release.ts";

// The two operator versions a chaos run with `--upgrade` switches between (the previous release, built from git
// history, and this tree), and the one place where switching touches the cluster: `use` makes it ready for a
// version's operator before that operator starts. Today that is the CRDs, applied the way docs/upgrade.md has a user
// do it: a newer operator gets its CRDs first; a rollback rolls back the operator only, never the CRDs. Whatever else
// an upgrade must install before the new operator runs (a conversion webhook) belongs in `use` too.

export interface OperatorRelease {
  version: string;
  /** Its `mds` entry script. */
  entry: string;
  /** Its CRDs, as files. */
  crdsDir: string;
  /** The crash points its operator knows: one armed with another name exits with code 2. */
  crashPoints: ReadonlySet<string>;
}

export interface Releases {
  previous: OperatorRelease;
  current: OperatorRelease;
  /** Makes the cluster ready for `release`'s operator (idempotent; calls are serialized). */
  use(release: OperatorRelease): Promise<void>;
  /** The version whose CRDs are installed. */
  crdsVersion(): string;
  /** Removes the previous release's tree. */
  remove(): Promise<void>;
}

/**
 * Builds the previous release under `dir` and installs its CRDs over the ones on the cluster (reached with
 * `kubeconfigPath`), as the cluster would be before an upgrade: the run starts from the previous release.
 */
export async function prepareReleases(dir: string, kubeconfigPath: string): Promise<Releases> {
  const treeDir = await mkdtemp(path.join(dir, "release-"));
  const tree = await buildPreviousRelease(treeDir);
  const previous: OperatorRelease = {
    version: previousRelease.version,
    entry: path.join(tree, "bin/mds.js"),
    crdsDir: path.join(tree, "crds"),
    crashPoints: new Set(crashPointsOf(tree)),
  };
  const current: OperatorRelease = {
    version: await currentVersion(),
    entry: path.join(repoRoot, "bin/mds.js"),
    crdsDir: path.join(repoRoot, "crds"),
    crashPoints: new Set(crashPoints()),
  };
  const applyCrds = async (release: OperatorRelease) => {
    const result = await runKubectl(kubeconfigPath, ["apply", "-f", release.crdsDir]);
    if (result.code !== 0) throw new Error(`cannot apply ${release.version}'s CRDs: ${result.stderr.trim()}`);
    const established = await runKubectl(kubeconfigPath, [
      "wait",
      "--for=condition=Established",
      "--timeout=60s",
      "-f",
      release.crdsDir,
    ]);
    if (established.code !== 0)
      throw new Error(`${release.version}'s CRDs not established: ${established.stderr.trim()}`);
  };
  // The stack installed this tree's CRDs, with nothing stored in them yet. A cluster before the upgrade has the
  // previous release's instead, and the API server refuses those over CRDs whose stored version they lack: these go.
  const removed = await runKubectl(kubeconfigPath, [
    "delete",
    "--wait=true",
    "--ignore-not-found",
    "-f",
    current.crdsDir,
  ]);
  if (removed.code !== 0) throw new Error(`cannot remove this tree's CRDs: ${removed.stderr.trim()}`);
  await applyCrds(previous);
  let crds = previous;
  let queue: Promise<void> = Promise.resolve();
  return {
    previous,
    current,
    use(release) {
      // Upgrading: the new CRDs before the new operator. Rolling back: nothing (the CRDs stay the newer ones).
      const step = queue.then(async () => {
        if (release === current && crds !== current) {
          await applyCrds(current);
          crds = current;
        }
      });
      queue = step.catch(() => undefined);
      return step;
    },
    crdsVersion: () => crds.version,
    remove: () => rm(treeDir, { recursive: true, force: true }),
  };
}
