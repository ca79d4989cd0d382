import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it, vi } from "vitest";
import { parse } from "yaml";
import { main } from "../cli/main.ts";
import { crdVersionAnnotation } from "../resources/kit/crd.ts";
import { renderCrdFiles } from "../resources/crd-files.ts";
import { buildInfo, readBuildInfo } from "./build-info.ts";
import { createMetricsRegistry } from "./metrics.ts";

// The version lives in package.json alone; everything that names it reads it from there.
const repoRoot = new URL("../../", import.meta.url);
const pkgVersion = (
  JSON.parse(readFileSync(new URL("package.json", repoRoot), "utf8")) as {
    version: string;
  }
).version;

describe("build info", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  // A tree laid out as the image's /app: package.json, dist/operator/build-info.js, maybe dist/build-commit.
  async function installed(version: string, commitFile?: string): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "mds-build-info-"));
    dirs.push(dir);
    await writeFile(join(dir, "package.json"), JSON.stringify({ name: "mds", version }));
    await mkdir(join(dir, "dist", "operator"), { recursive: true });
    if (commitFile !== undefined) await writeFile(join(dir, "dist", "build-commit"), commitFile);
    return pathToFileURL(join(dir, "dist", "operator", "build-info.js")).href;
  }

  it("reads the version from package.json and the commit from the build, else git, else unknown", async () => {
    const sha = "89abcdef0123456789abcdef0123456789abcdef";
    expect(readBuildInfo(await installed("9.8.7", `${sha}\n`))).toEqual({ version: "9.8.7", commit: sha });
    // Outside any git checkout and without a build-commit file: unknown, never a guess.
    expect(readBuildInfo(await installed("9.8.7"))).toEqual({ version: "9.8.7", commit: "unknown" });
    // Whatever is not a commit id (an unset build argument, garbage) reads unknown too.
    expect(readBuildInfo(await installed("9.8.7", "unknown\n"))).toEqual({ version: "9.8.7", commit: "unknown" });
    expect(readBuildInfo(await installed("9.8.7", '"}{ injected'))).toEqual({ version: "9.8.7", commit: "unknown" });
    // This checkout: git's HEAD.
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repoRoot, encoding: "utf8" }).trim();
    expect(buildInfo()).toEqual({ version: pkgVersion, commit: head });
  });

  it("is what `mds --version` prints", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      expect(await main(["--version"])).toBe(0);
      expect(log.mock.calls).toEqual([[pkgVersion]]);
    } finally {
      log.mockRestore();
    }
  });

  it("is served on /metrics as mds_build_info{version,commit} 1", async () => {
    const registry = createMetricsRegistry({ version: "1.2.3", commit: "abcdef0" });
    expect(await registry.metrics()).toContain('mds_build_info{version="1.2.3",commit="abcdef0"} 1');
    expect(await createMetricsRegistry().metrics()).toContain(
      `mds_build_info{version="${pkgVersion}",commit="${buildInfo().commit}"} 1`,
    );
  });

  it("annotates every CRD with the release that generated it, in crds/ too", async () => {
    for (const [file, text] of renderCrdFiles()) {
      const crd = parse(text) as { metadata: { annotations?: Record<string, string> } };
      expect({ file, version: crd.metadata.annotations?.[crdVersionAnnotation] }).toEqual({
        file,
        version: pkgVersion,
      });
      expect({ file, committed: await readFile(new URL(`crds/${file}`, repoRoot), "utf8") }).toEqual({
        file,
        committed: text,
      });
    }
  });

  it("is the image tag the deployment manifests default to", async () => {
    for (const file of ["deploy/base/kustomization.yaml", "deploy/overlays/with-service/kustomization.yaml"]) {
      const k = parse(await readFile(new URL(file, repoRoot), "utf8")) as { images: { newTag: string }[] };
      expect({ file, tags: k.images.map((i) => i.newTag) }).toEqual({ file, tags: k.images.map(() => pkgVersion) });
    }
  });
});
