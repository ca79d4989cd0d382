import { afterAll, describe, expect, it, vi } from "vitest";
import { mkdtemp, readdir, readFile, rm, writeFile, appendFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCrds } from "./crds.ts";

describe("mds crds", () => {
  const dirs: string[] = [];
  const tempDir = async () => {
    const d = await mkdtemp(join(tmpdir(), "mds-crds-cli-"));
    dirs.push(d);
    return d;
  };
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("writes every kind's CRD and their Kustomization, removes stale generated files", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "mds.dev_widgets.yaml"), "stale\n");
    await writeFile(join(dir, "Kustomization"), "resources: []\n");
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    expect(await runCrds(["--out", dir])).toBe(0);
    log.mockRestore();
    expect((await readdir(dir)).sort()).toEqual([
      "Kustomization",
      "mds.dev_backupschedules.yaml",
      "mds.dev_connections.yaml",
      "mds.dev_databasebackups.yaml",
      "mds.dev_databaserestores.yaml",
      "mds.dev_databases.yaml",
      "mds.dev_projects.yaml",
    ]);
    expect(await readFile(join(dir, "Kustomization"), "utf8")).toContain("  - mds.dev_connections.yaml\n");
  });

  it("--check exits 1 and names the file that drifted", async () => {
    const dir = await tempDir();
    const quiet = [
      vi.spyOn(console, "log").mockImplementation(() => undefined),
      vi.spyOn(console, "error").mockImplementation(() => undefined),
    ];
    await runCrds(["--out", dir]);
    expect(await runCrds(["--out", dir, "--check"])).toBe(0);
    await appendFile(join(dir, "mds.dev_databases.yaml"), "# edited by hand\n");
    expect(await runCrds(["--out", dir, "--check"])).toBe(1);
    expect(String(quiet[1]!.mock.calls[0]?.[0])).toContain("mds.dev_databases.yaml");
    for (const q of quiet) q.mockRestore();
  });

  it("refuses unknown options", async () => {
    const err = vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect(await runCrds(["--bogus"])).toBe(2);
    expect(String(err.mock.calls[0]?.[0])).toContain("Unknown option '--bogus'");
    err.mockRestore();
  });
});
