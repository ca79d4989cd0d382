import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// The operator process must not load @kubernetes/client-node: importing it costs ~80 MB of RSS (its whole
// generated API), which alone would break the 150 MB budget at 10,000 Databases. Type-only imports are fine (type
// stripping erases them); this follows what Node actually resolves at runtime from `mds operator`'s entry.
const probe = `
import { registerHooks } from "node:module";
const seen = new Set();
registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.add(r.url); return r; } });
await import(process.argv[1]);
process.stdout.write(JSON.stringify([...seen]));
`;

describe("the operator's runtime import graph", () => {
  it("never reaches @kubernetes/client-node from src/cli/operator.ts", async () => {
    const entry = path.resolve(import.meta.dirname, "operator.ts");
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", probe, entry], {
      maxBuffer: 16 * 1024 * 1024,
    });
    const urls = JSON.parse(stdout) as string[];
    expect(urls.some((u) => u.endsWith("/src/operator/index.ts"))).toBe(true);
    expect(urls.filter((u) => u.includes("@kubernetes/client-node"))).toEqual([]);
  });

  // In a pod the operator reads no kubeconfig file, so it must not load the YAML parser at start: kubeconfig.ts
  // requires it on first use (about 1 MB of RSS with its 72 modules, bench/history/2026-11-26-operator-memory.md).
  it("does not load the YAML parser at start", async () => {
    const entry = path.resolve(import.meta.dirname, "operator.ts");
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", probe, entry], {
      maxBuffer: 16 * 1024 * 1024,
    });
    expect((JSON.parse(stdout) as string[]).filter((u) => u.includes("/node_modules/yaml/"))).toEqual([]);
  });
});
