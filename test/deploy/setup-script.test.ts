// `bash scripts/setup.sh`, a newcomer's first screen, run for real on this machine's packages (every one present, as
// `npm test` needs them) in a copy of the script beside the project's package.json and lockfile, never in the
// repository itself (its `npm ci` would replace the node_modules the tests run from). `npm` and `node` are stand-ins
// on PATH (the seam: their output and exit code, not a registry); node_modules, when there is one, is what npm
// leaves: its record of the install (node_modules/.package-lock.json) and the project's Node 24.
import { spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function runSetup(cwd: string, path: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["scripts/setup.sh"], { cwd, env: { PATH: path, HOME: tmpdir() }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

// The system PATH, without the project's node_modules/.bin that vitest runs under (a newcomer has none yet).
const systemPath = (process.env["PATH"] ?? "")
  .split(":")
  .filter((d) => !d.includes("node_modules"))
  .join(":");

describe("setup.sh", () => {
  let dir: string;
  const ebadengine = [
    "npm warn EBADENGINE Unsupported engine {",
    "npm warn EBADENGINE   package: 'node@24.21.0',",
    "npm warn EBADENGINE   required: { node: '>=24' },",
    "npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }",
    "npm warn EBADENGINE }",
  ].join("\n");

  /**
   * A project copy whose `npm` prints `output` and exits with `code`, and whose `node --version` says `version`; with
   * `installed`, a node_modules whose record of the install lists the lockfile's packages, edited by `installed`.
   */
  async function project(
    name: string,
    nodeVersion: string,
    output: string,
    code: number,
    installed?: (packages: Record<string, { version?: string }>) => void,
  ): Promise<{ cwd: string; path: string }> {
    const cwd = join(dir, name);
    const bin = join(cwd, "fake-bin");
    await mkdir(join(cwd, "scripts"), { recursive: true });
    await mkdir(bin);
    await copyFile(join(repoRoot, "scripts", "setup.sh"), join(cwd, "scripts", "setup.sh"));
    for (const f of ["package.json", "package-lock.json"]) await copyFile(join(repoRoot, f), join(cwd, f));
    await writeFile(join(bin, "npm"), `#!/bin/bash\ncat <<'EOF'\n${output}\nEOF\nexit ${code}\n`, { mode: 0o755 });
    // `node --version` as asked; anything else (the script's check of node_modules) runs on the real Node.
    await writeFile(join(bin, "node"), `#!/bin/bash\n[ "$1" = --version ] && { echo ${nodeVersion}; exit 0; }\nexec ${process.execPath} "$@"\n`, { mode: 0o755 });
    if (installed !== undefined) {
      const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string; optional?: boolean }> };
      const packages = Object.fromEntries(Object.entries(lock.packages).filter(([k, p]) => k !== "" && p.optional !== true));
      installed(packages);
      await mkdir(join(cwd, "node_modules", ".bin"), { recursive: true });
      await writeFile(join(cwd, "node_modules", ".package-lock.json"), JSON.stringify({ ...lock, packages }));
      await symlink(process.execPath, join(cwd, "node_modules", ".bin", "node"));
    }
    return { cwd, path: `${bin}:${systemPath}` };
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-setup-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prints what it found and nothing else when everything is present, at once and again on a second run; npm never runs", async () => {
    const p = await project("current", "v20.20.2", "npm must not run", 99, () => {});
    for (let i = 0; i < 2; i++) {
      const started = Date.now();
      expect(await runSetup(p.cwd, p.path)).toEqual({
        code: 0,
        stdout: "setup: every package it needs is present\nsetup: node_modules is current (npm ci skipped; run it yourself to reinstall)\n",
        stderr: "",
      });
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  });

  it("runs npm ci when node_modules holds a package at another version than the lockfile's", async () => {
    const p = await project("stale", "v20.20.2", "added 1 package in 1s", 0, (packages) => {
      const [name] = Object.keys(packages).filter((k) => packages[k]?.version !== undefined);
      packages[name!] = { ...packages[name!], version: "0.0.0-stale" };
    });
    expect(await runSetup(p.cwd, p.path)).toEqual({ code: 0, stdout: "setup: every package it needs is present\nsetup: npm ci: added 1 package in 1s\n", stderr: "" });
  });

  it("under an older Node: leaves the expected EBADENGINE warnings out, keeps any other warning, says what it installed", async () => {
    const p = await project("old-node", "v20.20.2", `${ebadengine}\nnpm warn deprecated glob@7.2.3: old\n\nadded 346 packages in 52s`, 0);
    expect(await runSetup(p.cwd, p.path)).toEqual({
      code: 0,
      stdout: "setup: every package it needs is present\nsetup: npm ci: added 346 packages in 52s\n",
      stderr: "npm warn deprecated glob@7.2.3: old\n",
    });
  });

  it("under Node 24: an EBADENGINE warning is not expected and is shown", async () => {
    const p = await project("node-24", "v24.21.0", `${ebadengine}\nadded 346 packages in 52s`, 0);
    const run = await runSetup(p.cwd, p.path);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(`${ebadengine}\n`);
  });

  it("on failure: everything npm printed, warnings included, and its exit code", async () => {
    const failure = `${ebadengine}\nnpm error code ETARGET\nnpm error notarget No matching version found for pg@99.`;
    const p = await project("failing", "v20.20.2", failure, 1);
    expect(await runSetup(p.cwd, p.path)).toEqual({
      code: 1,
      stdout: "setup: every package it needs is present\n",
      stderr: `${failure}\nsetup: npm ci failed (exit 1)\n`,
    });
  });
});
