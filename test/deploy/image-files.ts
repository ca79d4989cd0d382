// The image's /app as the Dockerfile makes it, without a Docker engine: the runtime stage's COPY steps are read from
// the Dockerfile and each is emulated (the build stage's tsc over src/, the
// prod-deps stage's `npm ci --omit=dev` from package-lock.json, the context files). A COPY this file cannot emulate
// fails loudly, so the emulation cannot drift from the Dockerfile unnoticed. image.test.ts runs the result;
// image-run.test.ts compares it with the /app of the image scripts/build-image.sh built.
import { spawn } from "node:child_process";
import { cp, mkdir, readFile, readdir, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { operatorApp } from "../../scripts/image/operator-app.ts";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

export interface Instruction {
  keyword: string;
  args: string;
}
export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}
export interface Dockerfile {
  args: Map<string, string>;
  stages: Stage[];
}

// A small Dockerfile reader: joins continuation lines, drops comments, splits into stages.
export function parseDockerfile(text: string): Dockerfile {
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

export async function readDockerfile(): Promise<Dockerfile> {
  return parseDockerfile(await readFile(join(repoRoot, "Dockerfile"), "utf8"));
}

export function stage(dockerfile: Dockerfile, name: string): Stage {
  const s = dockerfile.stages.find((x) => x.name === name);
  if (s === undefined) throw new Error(`the Dockerfile has no stage ${name}`);
  return s;
}

/** The instructions a stage runs, including those of the stages it is built FROM. */
export function chain(dockerfile: Dockerfile, s: Stage): Instruction[] {
  const parent = dockerfile.stages.find((x) => x.name === s.from);
  return [...(parent ? chain(dockerfile, parent) : []), ...s.instructions];
}

/** Every file (and symlink) under root, as a path relative to it, sorted. */
export async function listFiles(root: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name));
      else files.push(relative(root, join(d, e.name)));
    }
  };
  await walk(root);
  return files.sort();
}

export function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { PATH: "/usr/bin:/bin", ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => chunks.push(b));
    child.stderr.on("data", (b: Buffer) => chunks.push(b));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output: Buffer.concat(chunks).toString("utf8") }));
  });
}

interface LockEntry {
  version?: string;
  resolved?: string;
  link?: boolean;
  dev?: boolean;
  devOptional?: boolean;
  bin?: Record<string, string>;
}
interface Lockfile {
  name: string;
  version: string;
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
}

/** package-lock.json's entries that `npm ci --omit=dev` installs. A link (`file:` dependency such as @mds/devkube)
 * carries no dev flag of its own: its target's entry (packages/devkube) does. */
export async function productionLockEntries(): Promise<[string, LockEntry][]> {
  const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as Lockfile;
  const production = (p: LockEntry | undefined): boolean =>
    p !== undefined && !p.dev && !p.devOptional && (!p.link || production(lock.packages[p.resolved ?? ""]));
  return Object.entries(lock.packages).filter(([path, p]) => path.startsWith("node_modules/") && production(p));
}

/** The commit the emulated build passes as the Dockerfile's MDS_COMMIT build argument. */
export const emulatedCommit = "0123456789abcdef0123456789abcdef01234567";

// build stage: tsc, the operator's entry bundled (scripts/bundle-operator.ts), the build's commit
// (dist/build-commit), the non-TypeScript assets (SQL migrations) beside the output.
async function emulateBuild(dist: string): Promise<void> {
  const tsc = await run(process.execPath, [join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", dist], repoRoot);
  if (tsc.code !== 0) throw new Error(`tsc -p tsconfig.build.json failed, so the image build would fail:\n${tsc.output}`);
  const bundle = await run(process.execPath, [join(repoRoot, "scripts/bundle-operator.ts"), dist], repoRoot);
  if (bundle.code !== 0) throw new Error(`scripts/bundle-operator.ts failed, so the image build would fail:\n${bundle.output}`);
  await writeFile(join(dist, "build-commit"), `${emulatedCommit}\n`);
  await cp(join(repoRoot, "src"), dist, { recursive: true, filter: (src) => !src.endsWith(".ts") });
}

// prod-deps stage: the production packages of package-lock.json as `npm ci --omit=dev` lays them out (copied from the
// repository's full install, whose layout is the lockfile's), their bin links, and npm's hidden lockfile.
async function emulateProdDeps(dockerfile: Dockerfile, nodeModules: string): Promise<void> {
  const install = stage(dockerfile, "prod-deps").instructions.filter((i) => i.keyword === "RUN").map((i) => i.args).join(" ");
  if (!/npm ci --omit=dev\b/.test(install)) throw new Error(`the prod-deps stage no longer runs npm ci --omit=dev: ${install}`);
  const app = dirname(nodeModules);
  const production = await productionLockEntries();
  const topLevel = production.filter(([path]) => path.split("node_modules/").length === 2);
  // From each package's real path: a node_modules whose entries are links (a worktree sharing another's install) is
  // copied, never linked, so nothing below writes into the install it came from.
  await Promise.all(
    topLevel.map(async ([path]) =>
      cp(await realpath(join(repoRoot, path)), join(app, path), { recursive: true, verbatimSymlinks: true }),
    ),
  );
  for (const [path, p] of production) {
    for (const [name, target] of Object.entries(p.bin ?? {})) {
      const binDir = join(app, path.slice(0, path.lastIndexOf("node_modules/") + "node_modules".length), ".bin");
      await mkdir(binDir, { recursive: true });
      // A nested package's .bin came along with its parent's copy: lay it anew as npm would.
      await rm(join(binDir, name), { force: true });
      await symlink(relative(binDir, join(app, path, target)), join(binDir, name));
    }
  }
  const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as Lockfile;
  await writeFile(join(nodeModules, ".package-lock.json"), JSON.stringify({ name: lock.name, version: lock.version, lockfileVersion: lock.lockfileVersion, requires: true, packages: Object.fromEntries(production) }, null, 2));
}

/** Assembles into `app` what the Dockerfile's runtime stage puts in /app (the service image's). */
export async function assembleDockerfileApp(dockerfile: Dockerfile, app: string): Promise<void> {
  const workdir = chain(dockerfile, stage(dockerfile, "runtime")).findLast((i) => i.keyword === "WORKDIR")?.args;
  if (workdir !== "/app") throw new Error(`the runtime stage's WORKDIR is ${workdir}, not /app`);
  for (const copy of stage(dockerfile, "runtime").instructions.filter((i) => i.keyword === "COPY")) {
    const from = /--from=(\S+)/.exec(copy.args)?.[1];
    const [source = "", dest = ""] = copy.args.replace(/--from=\S+\s*/, "").split(/\s+/);
    const target = join(app, dest);
    if (from === "build" && source === "/app/dist") await emulateBuild(target);
    else if (from === "prod-deps" && source === "/app/node_modules") await emulateProdDeps(dockerfile, target);
    else if (from === undefined) {
      await mkdir(dest.endsWith("/") ? target : dirname(target), { recursive: true });
      await cp(join(repoRoot, source), dest.endsWith("/") ? join(target, source.split("/").at(-1) ?? source) : target);
    } else throw new Error(`test/deploy/image-files.ts cannot emulate "COPY ${copy.args}": teach it what that step copies`);
  }
}

/**
 * Assembles into `app` the operator image's /app: the runtime's (into `runtimeApp`), then the operator-app stage's
 * script over it, as the operator stage copies it. Fails when the Dockerfile no longer does it this way.
 */
export async function assembleOperatorApp(dockerfile: Dockerfile, runtimeApp: string, app: string): Promise<void> {
  const appStage = stage(dockerfile, "operator-app");
  const run = appStage.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);
  if (appStage.from !== "runtime" || run.join(" ") !== "node /tmp/operator-app.ts /app /operator-app")
    throw new Error(`the operator-app stage no longer runs scripts/image/operator-app.ts over the runtime's /app: ${run.join(" ")}`);
  const copies = stage(dockerfile, "operator").instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
  if (copies.join("\n") !== "--from=operator-app /operator-app/ ./")
    throw new Error(`the operator stage copies more than the operator-app stage's /app: ${copies.join("; ")}`);
  await assembleDockerfileApp(dockerfile, runtimeApp);
  await operatorApp(runtimeApp, app);
}
