// The container image, without a Docker engine: the Dockerfile is checked statically, and the file set it
// produces (compiled dist/, production dependencies only, package.json, the image's entry point) is assembled in
// a temporary directory and run, so `mds operator` is proven to start from exactly what the image holds.
import { spawn } from "node:child_process";
import { cp, mkdtemp, readFile, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevkube } from "../../src/devkube/index.ts";
import { eventually } from "../support/eventually.ts";
import { kubectl } from "./kubectl.ts";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

// A small Dockerfile reader: joins continuation lines, drops comments, splits into stages.
function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const lines = text.replace(/\\\n/g, " ").split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const instruction = { keyword: keyword.toUpperCase(), args: rest.join(" ") };
    if (instruction.keyword === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      stages.push({ from: m?.[1] ?? "", name: m?.[2], instructions: [] });
    } else if (stages.length === 0 && instruction.keyword === "ARG") {
      const [name = "", value = ""] = instruction.args.split("=");
      args.set(name, value);
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return { args, stages };
}

// Every file under root, as a path relative to it.
async function listFiles(root: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name));
      else files.push(relative(root, join(d, e.name)));
    }
  };
  await walk(root);
  return files;
}

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
  let dockerfile: ReturnType<typeof parseDockerfile>;
  const stage = (name: string) => {
    const s = dockerfile.stages.find((x) => x.name === name);
    if (s === undefined) throw new Error(`no stage ${name}`);
    return s;
  };
  // The instructions a stage runs, including those of the stages it is built FROM.
  const chain = (s: Stage): Instruction[] => {
    const parent = dockerfile.stages.find((x) => x.name === s.from);
    return [...(parent ? chain(parent) : []), ...s.instructions];
  };

  beforeAll(async () => {
    dockerfile = parseDockerfile(await readFile(join(repoRoot, "Dockerfile"), "utf8"));
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
  });
});

describe("the image's file set", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mds-image-"));
    // What the build stage does: tsc, then the non-TypeScript assets (SQL migrations) beside the output.
    const tsc = await run(process.execPath, [join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", join(dir, "dist")], repoRoot);
    if (tsc.code !== 0) throw new Error(`tsc -p tsconfig.build.json failed, so the image build would fail:\n${tsc.output}`);
    await cp(join(repoRoot, "src"), join(dir, "dist"), { recursive: true, filter: (src) => !src.endsWith(".ts") });
    // What the prod-deps stage does: the packages package-lock.json does not mark as dev-only.
    const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, { dev?: boolean; devOptional?: boolean }> };
    const production = Object.entries(lock.packages).filter(([path, p]) => path.startsWith("node_modules/") && path.split("node_modules/").length === 2 && !p.dev && !p.devOptional);
    await Promise.all(production.map(([path]) => cp(join(repoRoot, path), join(dir, path), { recursive: true, verbatimSymlinks: true })));
    await cp(join(repoRoot, "package.json"), join(dir, "package.json"));
    await cp(join(repoRoot, "deploy/image/mds.js"), join(dir, "bin/mds.js"));
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

  it("runs `mds --help` on Node 24 from dist/ with production dependencies only", async () => {
    const result = await run(process.execPath, ["bin/mds.js", "--help"], dir);
    expect(result).toMatchObject({ code: 0 });
    expect(result.output).toContain("usage: mds <command>");
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
        expect((await fetch(`${healthUrl}/metrics`)).status).toBe(200);
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
