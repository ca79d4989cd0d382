import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Which mds this is, in words a user can name: the version (package.json's, the only place it is written) and the
// commit it was built from. A build writes the commit to dist/build-commit (the Dockerfile's MDS_COMMIT build
// argument, scripts/build-image.sh from git); a source checkout asks git at run time; neither: "unknown".
// `mds --version`, the operator's startup log, /metrics (mds_build_info) and the CRDs' mds.dev/version annotation
// all read it from here.

export interface BuildInfo {
  version: string;
  commit: string;
}

// package.json is two levels up from every place this code runs (src/operator/, dist/operator/, and dist/cli/ for
// the bundled operator), dist/build-commit one level up from the compiled ones.
const here = import.meta.url;

export function mdsVersion(moduleUrl: string = here): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", moduleUrl), "utf8")) as { version: string }).version;
}

const commitPattern = /^[0-9a-f]{7,64}$/;

function readOrUndefined(read: () => string): string | undefined {
  try {
    return read().trim().toLowerCase();
  } catch {
    return undefined;
  }
}

/** The version and the commit (anything that is not a hex commit id reads "unknown"); `moduleUrl` for tests. */
export function readBuildInfo(moduleUrl: string = here): BuildInfo {
  const commit =
    readOrUndefined(() => readFileSync(new URL("../build-commit", moduleUrl), "utf8")) ??
    readOrUndefined(() =>
      execFileSync("git", ["rev-parse", "HEAD"], {
        cwd: fileURLToPath(new URL("../../", moduleUrl)),
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
        timeout: 5000,
      }),
    );
  return {
    version: mdsVersion(moduleUrl),
    commit: commit !== undefined && commitPattern.test(commit) ? commit : "unknown",
  };
}

let cached: BuildInfo | undefined;

/** This process's build (read once). */
export function buildInfo(): BuildInfo {
  cached ??= readBuildInfo();
  return cached;
}
