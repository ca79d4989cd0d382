// The container images, without a Docker engine: the Dockerfile is checked statically, and the file sets it
// produces are assembled in a temporary directory by emulating its steps (image-files.ts) and run: the service
// image's (compiled dist/ of src/, which holds no devkube, production dependencies only, package.json, the image's
// entry point) and the operator image's (only what `mds operator` loads, scripts/image/operator-app.ts), so
// `mds operator` is proven to start from exactly what the operator image holds. The image itself, built and run in podman: test/image/image-run.test.ts
// (`npm run test:image`).
import { spawn } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevkube } from "@mds/devkube";
import { eventually } from "../support/eventually.ts";
import { operatorFiles } from "../../scripts/image/operator-app.ts";
import { assembleDockerfileApp, assembleOperatorApp, emulatedCommit, chain as chainOf, listFiles, readDockerfile, repoRoot, stage as stageOf, type Dockerfile } from "./image-files.ts";
import { kubectl } from "./kubectl.ts";

function run(command: string, args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return start(command, args, cwd).done;
}

// A child process with a clean environment: nothing from the machine (no KUBECONFIG, no tokens) leaks into what
// the image would see.
function start(command: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const child = spawn(command, args, { cwd, env: { PATH: "/usr/bin:/bin", NODE_ENV: "production", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const chunks: Buffer[] = [];
  child.stdout.on("data", (b: Buffer) => chunks.push(b));
  child.stderr.on("data", (b: Buffer) => chunks.push(b));
  const done = new Promise<{ code: number; output: string }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output: Buffer.concat(chunks).toString("utf8") }));
  });
  return { child, output: () => Buffer.concat(chunks).toString("utf8"), done };
}

describe("Dockerfile", () => {
  let dockerfile: Dockerfile;
  const stage = (name: string) => stageOf(dockerfile, name);
  const chain = (s: Parameters<typeof chainOf>[1]) => chainOf(dockerfile, s);

  beforeAll(async () => {
    dockerfile = await readDockerfile();
  });

  it("is multi-stage on a Node 24 base", () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(3);
    expect(dockerfile.args.get("NODE_IMAGE")).toMatch(/^node:24(\.\d+)*-[a-z]+-slim$/);
    for (const s of dockerfile.stages) expect(s.from === "${NODE_IMAGE}" || dockerfile.stages.some((x) => x.name === s.from)).toBe(true);
  });

  it("ends with the operator as the default target, run as a numeric non-root user", () => {
    const last = dockerfile.stages.at(-1);
    expect(last?.name).toBe("operator");
    for (const [name, command] of [["operator", "operator"], ["service", "service"]] as const) {
      const instructions = chain(stage(name));
      expect(instructions.filter((i) => i.keyword === "ENTRYPOINT").at(-1)?.args).toBe(`["node", "/app/bin/mds.js", "${command}"]`);
      const user = instructions.filter((i) => i.keyword === "USER").at(-1)?.args ?? "root";
      expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    }
  });

  it("ships production dependencies only, and compiles with the repository's own TypeScript", () => {
    const runtime = stage("runtime").instructions;
    const nodeModules = runtime.find((i) => i.keyword === "COPY" && i.args.includes("node_modules"));
    const from = /--from=(\S+)/.exec(nodeModules?.args ?? "")?.[1] ?? "";
    const install = stage(from).instructions.filter((i) => i.keyword === "RUN").map((i) => i.args).join(" ");
    expect(install).toMatch(/npm ci --omit=dev/);
    expect(stage("build").instructions.map((i) => i.args).join(" ")).toContain("tsc -p tsconfig.build.json");
    // Nothing but the build products and package.json reaches the runtime from the context.
    const contextCopies = runtime.filter((i) => i.keyword === "COPY" && !i.args.includes("--from=")).map((i) => i.args);
    expect(contextCopies).toEqual(["package.json ./", "deploy/image/mds.js ./bin/mds.js"]);
  });

  it("labels the image with package.json's version and the build's commit (OCI annotations), and writes the commit into dist/", async () => {
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string };
    expect(dockerfile.args.get("MDS_VERSION")).toBe(pkg.version);
    expect(dockerfile.args.get("MDS_COMMIT")).toBe("unknown");
    const labels = chain(stage("operator")).filter((i) => i.keyword === "LABEL").map((i) => i.args).join(" ");
    expect(labels).toContain('org.opencontainers.image.version="${MDS_VERSION}"');
    expect(labels).toContain('org.opencontainers.image.revision="${MDS_COMMIT}"');
    expect(stage("build").instructions.map((i) => i.args).join(" ")).toContain('echo "$MDS_COMMIT" > dist/build-commit');
    // scripts/build-image.sh (the image without a registry) labels it the same way.
    const script = await readFile(join(repoRoot, "scripts/build-image.sh"), "utf8");
    expect(script).toContain("LABEL org.opencontainers.image.version=$version");
    expect(script).toContain("LABEL org.opencontainers.image.revision=$commit");
    expect(script).toContain('echo "$commit" > "$app/dist/build-commit"');
  });

  it("has a .dockerignore that admits only what the Dockerfile copies", async () => {
    const ignore = (await readFile(join(repoRoot, ".dockerignore"), "utf8")).split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    expect(ignore[0]).toBe("*");
    const admitted = ignore.filter((l) => l.startsWith("!")).map((l) => l.slice(1).replace(/\/$/, ""));
    const copied = dockerfile.stages
      .flatMap((s) => s.instructions)
      .filter((i) => i.keyword === "COPY" && !i.args.includes("--from="))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    for (const source of copied) expect({ source, admitted: admitted.includes(source.replace(/\/$/, "")) }).toEqual({ source, admitted: true });
    for (const path of admitted) await expect(stat(join(repoRoot, path))).resolves.toBeDefined();
    // devkube (packages/devkube/) and the local stack (dev/) never reach the build.
    expect(admitted.filter((path) => /^(packages|dev)(\/|$)/.test(path))).toEqual([]);
  });
});

describe("the service image's file set (the runtime stage)", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-image-"));
    await assembleDockerfileApp(await readDockerfile(), dir);
  }, 180_000);

  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("holds no dev dependency, no TypeScript source and no test", async () => {
    const modules = await readdir(join(dir, "node_modules"));
    for (const dev of ["typescript", "vitest", "eslint", "node", "kubernetes-models", "@aws-cdk"]) expect(modules).not.toContain(dev);
    const files = (await listFiles(join(dir, "dist"))).map((f) => `dist/${f}`);
    expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([]);
    expect(files.filter((f) => /\.test\.js$/.test(f))).toEqual([]);
    expect(files).toContain("dist/cli/main.js");
  });

  it("holds no test support: no chaos harness, fault proxy, emulator or fake (they live in test/support/)", async () => {
    const files = await listFiles(join(dir, "dist"));
    expect(files.length).toBeGreaterThan(50);
    expect(files.filter((f) => /testing|fake|chaos|fault-proxy|emulator/i.test(f))).toEqual([]);
  });

  it("holds no devkube: no module of packages/devkube/ or dev/, no package only devkube needs, and `mds dev`/`mds devkube` say why", async () => {
    const files = (await listFiles(dir)).filter((f) => !f.startsWith("node_modules/"));
    expect(files.length).toBeGreaterThan(50);
    // dist/ is src/ compiled: nothing else (dev/commands.ts, dev/stack.ts) and no folder named after devkube.
    const devkubeModules = (await listFiles(join(repoRoot, "packages/devkube/src"))).filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"));
    expect(devkubeModules.length).toBeGreaterThan(30);
    expect(files.filter((f) => /devkube|(^|\/)dev\/|(^|\/)packages\//.test(f))).toEqual([]);
    // No compiled file names devkube's package or its entry points.
    const texts = await Promise.all(files.filter((f) => f.endsWith(".js")).map(async (f) => ({ f, text: await readFile(join(dir, f), "utf8") })));
    const mentions = texts.filter(({ text }) => /@mds\/devkube|packages\/devkube|startDevkube|dev\/commands/.test(text)).map(({ f }) => f);
    expect(mentions).toEqual([]);
    // Production dependencies only: devkube is a devDependency, so neither it nor what only it needs is installed.
    const modules = await readdir(join(dir, "node_modules"));
    expect(modules).not.toContain("@mds");
    const devkubePackage = JSON.parse(await readFile(join(repoRoot, "packages/devkube/package.json"), "utf8")) as { dependencies: Record<string, string> };
    const rootPackage = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    const devkubeOnly = Object.keys(devkubePackage.dependencies).filter((name) => !(name in rootPackage.dependencies));
    expect(devkubeOnly).toContain("@marcbachmann/cel-js");
    for (const name of devkubeOnly) await expect(stat(join(dir, "node_modules", name))).rejects.toThrow(/ENOENT/);
    for (const command of ["dev", "devkube"]) {
      const result = await run(process.execPath, ["bin/mds.js", command], dir);
      expect(result).toMatchObject({ code: 2 });
      expect(result.output).toContain(`mds: "${command}" is a development and test tool and is not in this image`);
    }
    const help = await run(process.execPath, ["bin/mds.js", "--help"], dir);
    expect(help.output).not.toMatch(/^\s+(dev|devkube)\s/m);
  });

  it("loads only what it holds: every import of a compiled module is a file in dist/, a Node built-in or an installed production package", async () => {
    const modules = new Set(await readdir(join(dir, "node_modules")));
    const scoped = [...modules].filter((m) => m.startsWith("@"));
    for (const scope of scoped) for (const name of await readdir(join(dir, "node_modules", scope))) modules.add(`${scope}/${name}`);
    const files = (await listFiles(join(dir, "dist"))).filter((f) => f.endsWith(".js"));
    const unresolved: string[] = [];
    for (const file of files) {
      const text = await readFile(join(dir, "dist", file), "utf8");
      const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|\bimport\(\s*"([^"]+)"\s*\)|(?:^|\n)\s*import\s+"([^"]+)"/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
      for (const spec of specifiers) {
        if (spec.startsWith("node:")) continue;
        if (spec.startsWith(".")) {
          const target = join(dir, "dist", file, "..", spec);
          if (!target.startsWith(join(dir, "dist") + "/") || !(await stat(target).then(() => true, () => false))) unresolved.push(`${file}: ${spec}`);
          continue;
        }
        const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] ?? "");
        if (!modules.has(name)) unresolved.push(`${file}: ${spec}`);
      }
    }
    expect(files.length).toBeGreaterThan(50);
    expect(unresolved).toEqual([]);
  });

  // One module for V8 to keep instead of 433, in ASCII (a source with a character above U+00FF is kept at two
  // bytes a character): 4-5 MB less RSS (scripts/bundle-operator.ts, bench/history/2026-11-26-operator-memory-2.md).
  it("runs the operator from one module: dist/cli/operator.js is bundled, imports Node's built-ins only and is ASCII", async () => {
    const text = await readFile(join(dir, "dist/cli/operator.js"), "utf8");
    const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|\bimport\(\s*"([^"]+)"\s*\)|(?:^|\n)\s*import\s+"([^"]+)"/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
    expect(specifiers.length).toBeGreaterThan(0);
    expect(specifiers.filter((s) => !s.startsWith("node:"))).toEqual([]);
    expect(text).toContain("createOperatorWithKinds");
    expect([...text].filter((c) => c.charCodeAt(0) > 0x7f)).toEqual([]);
  });

  it("loads every command the image keeps (their imports never reach devkube) and prints the version", async () => {
    for (const command of ["service", "token", "crds", "prepare-rollback"]) {
      const result = await run(process.execPath, ["bin/mds.js", command, "--help"], dir);
      expect({ command, output: result.output }).not.toMatchObject({ output: expect.stringMatching(/Cannot find (module|package)|ERR_MODULE_NOT_FOUND/) });
      expect({ command, code: result.code }).toEqual({ command, code: 0 });
    }
    const version = await run(process.execPath, ["bin/mds.js", "--version"], dir);
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string };
    expect(version).toEqual({ code: 0, output: `${pkg.version}\n` });
  });

  it("runs `mds --help` on Node 24 from dist/ with production dependencies only", async () => {
    const result = await run(process.execPath, ["bin/mds.js", "--help"], dir);
    expect(result).toMatchObject({ code: 0 });
    expect(result.output).toContain("usage: mds <command>");
  });

});

describe("the operator image's file set (the operator stage)", () => {
  let dir: string;
  let runtimeDir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-image-operator-"));
    runtimeDir = await mkdtemp(join(tmpdir(), "mds-image-runtime-"));
    await assembleOperatorApp(await readDockerfile(), runtimeDir, dir);
  }, 180_000);

  afterAll(async () => {
    for (const d of [dir, runtimeDir]) if (d !== undefined) await rm(d, { recursive: true, force: true });
  });

  it("holds what `mds operator` loads and yaml, with no source map, README or type declaration: under 5 MB", async () => {
    const files = await listFiles(dir);
    expect(files.filter((f) => !f.startsWith("node_modules/"))).toEqual([...operatorFiles].sort());
    expect(new Set(files.filter((f) => f.startsWith("node_modules/")).map((f) => f.split("/")[1]))).toEqual(new Set(["yaml"]));
    expect(files.filter((f) => /\.(map|md|d\.ts)$/i.test(f))).toEqual([]);
    const sizes = await Promise.all(files.map(async (f) => (await stat(join(dir, f))).size));
    expect(sizes.reduce((a, b) => a + b, 0)).toBeLessThan(5 * 1024 * 1024);
  });

  it("lists every npm package whose code it holds: the bundle's and yaml, at the lockfile's versions", async () => {
    const listed = JSON.parse(await readFile(join(dir, "dist/cli/operator.packages.json"), "utf8")) as { name: string; version: string }[];
    const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string }> };
    for (const name of ["prom-client", "pino", "undici", "zod", "yaml"]) expect(listed.map((p) => p.name)).toContain(name);
    // A package may be installed at several versions (nested node_modules): the listed one is one of the lockfile's.
    const versionsOf = (name: string) =>
      Object.entries(lock.packages)
        .filter(([at]) => at === `node_modules/${name}` || at.endsWith(`/node_modules/${name}`))
        .map(([, entry]) => entry.version);
    for (const p of listed) expect({ name: p.name, versions: versionsOf(p.name) }).toEqual({ name: p.name, versions: expect.arrayContaining([p.version]) });
  });

  it("says which commands are not in it, and still prints the version and the help", async () => {
    for (const command of ["service", "token", "crds"]) {
      const result = await run(process.execPath, ["bin/mds.js", command, "--help"], dir);
      expect({ command, ...result }).toEqual({ command, code: 2, output: `mds: "${command}" is not in this image: the operator image holds \`mds operator\` and \`mds webhook\` (scripts/image/operator-app.ts); the service image holds every command\n` });
    }
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string };
    expect(await run(process.execPath, ["bin/mds.js", "--version"], dir)).toEqual({ code: 0, output: `${pkg.version}\n` });
    expect((await run(process.execPath, ["bin/mds.js", "--help"], dir)).output).toContain("usage: mds <command>");
    // The conversion webhook's Deployment runs this image too.
    expect(await run(process.execPath, ["bin/mds.js", "webhook", "--help"], dir)).toMatchObject({ code: 0 });
  });

  it("runs `mds operator` from the file set: it reaches devkube, leads, becomes ready, and stops cleanly on SIGTERM", async () => {
    const kubeDir = join(dir, "devkube");
    const devkube = await startDevkube({ dir: kubeDir });
    try {
      const crds = await kubectl(["apply", "-f", join(repoRoot, "crds")], { kubeconfig: devkube.kubeconfigPath });
      expect(crds.code).toBe(0);
      expect((await kubectl(["create", "namespace", "mds-system"], { kubeconfig: devkube.kubeconfigPath })).code).toBe(0);
      // As the Deployment runs it: options from the environment, leader election in POD_NAMESPACE.
      const operator = start(process.execPath, ["bin/mds.js", "operator", "--leader-elect", "--metrics-address=127.0.0.1:0"], dir, {
        KUBECONFIG: devkube.kubeconfigPath,
        MDS_API_URL: "http://127.0.0.1:9",
        MDS_INSTANCE_ID: "image-test",
        POD_NAMESPACE: "mds-system",
        POD_NAME: "mds-operator-image-test",
      });
      try {
        const healthUrl = await eventually(() => {
          const m = /"healthUrl":"([^"]+)"/.exec(operator.output());
          if (!m?.[1]) throw new Error(`no healthUrl logged yet: ${operator.output().slice(-500)}`);
          return m[1];
        }, { what: "the operator's health server" });
        const readyz = await eventually(async () => {
          const res = await fetch(`${healthUrl}/readyz`);
          const text = await res.text();
          if (res.status !== 200 || text !== "ok: leader\n") throw new Error(`${res.status} ${text}`);
          return text;
        }, { what: "/readyz ok as leader" });
        expect(readyz).toBe("ok: leader\n");
        const metrics = await fetch(`${healthUrl}/metrics`);
        expect(metrics.status).toBe(200);
        // The release a user can name: the commit is the build's (dist/build-commit), not git's (there is none here).
        const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string };
        expect(await metrics.text()).toContain(`mds_build_info{version="${pkg.version}",commit="${emulatedCommit}"} 1`);
        expect(operator.output()).toContain(`"msg":"Starting operator ${pkg.version}"`);
      } finally {
        operator.child.kill("SIGTERM");
      }
      const exit = await operator.done;
      expect(exit.output).not.toMatch(/Cannot find (module|package)/);
      expect(exit.code).toBe(0);
    } finally {
      await devkube.stop();
    }
  });

  it("runs the entrypoint `mds operator --help`", async () => {
    const result = await run(process.execPath, ["bin/mds.js", "operator", "--help"], dir);
    expect(result.output).not.toMatch(/Cannot find (module|package)/);
    expect(result).toMatchObject({ code: 0 });
    expect(result.output).toMatch(/--api-url/);
  });
});
