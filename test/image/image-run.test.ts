// The built image, run: `npm run test:image` (not part of `npm test`: building takes two minutes with the Debian base
// cached and four without, more than `npm test`'s budget). It builds with scripts/build-image.sh, then checks what a
// platform team relies on, in podman (runc; crun refuses this kernel's hybrid cgroups, and the ulimits are lowered
// because raising them is not permitted here):
//   - /app is the Dockerfile's operator /app file for file (test/deploy/image-files.ts emulates the Dockerfile's
//     steps), and the image is at most 200 MB uncompressed;
//   - the image config is the Dockerfile's (ENV, WORKDIR, USER, ENTRYPOINT);
//   - it runs as uid 65532 on a read-only root filesystem and owns nothing; devkube is not in it;
//   - `--help` and `--version` work, and the operator reconciles a Database against devkube and the service (both on
//     the host, --network host) with its kubeconfig mounted read-only;
//   - the SBOM written beside the tarball lists what the image holds.
import { spawn } from "node:child_process";
import { createReadStream } from "node:fs";
import { createHash } from "node:crypto";
import { chown, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack, type Stack } from "../../dev/stack.ts";
import {
  assembleOperatorApp,
  chain,
  listFiles,
  readDockerfile,
  repoRoot,
  run,
  stage,
  type Dockerfile,
} from "../deploy/image-files.ts";
import { kubectl } from "../deploy/kubectl.ts";

const out = process.env.MDS_IMAGE_OUT ?? join(repoRoot, ".image");
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
const runAs = [
  "run",
  "--rm",
  "--runtime",
  "runc",
  "--read-only",
  "--user",
  "65532:65532",
  "--ulimit",
  "nofile=1024:1024",
  "--ulimit",
  "nproc=1024:1024",
];

let version: string;
let image: string;
let dockerfile: Dockerfile;

const podman = (args: string[]) => run("podman", args, repoRoot, env);

beforeAll(async () => {
  version = (JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string }).version;
  image = `mds:${version}`;
  dockerfile = await readDockerfile();
  // MDS_IMAGE_REUSE=1 tests the image and files a previous build left (while changing this test, not the image).
  if (process.env.MDS_IMAGE_REUSE === "1") return;
  const build = await run("bash", ["scripts/build-image.sh"], repoRoot, { ...env, MDS_IMAGE_OUT: out });
  if (build.code !== 0) throw new Error(`scripts/build-image.sh failed:\n${build.output.slice(-4000)}`);
}, 20 * 60_000);

describe("the image built by scripts/build-image.sh", () => {
  it("holds the Dockerfile's operator /app, file for file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mds-image-dockerfile-"));
    const runtimeDir = await mkdtemp(join(tmpdir(), "mds-image-runtime-"));
    try {
      await assembleOperatorApp(dockerfile, runtimeDir, dir);
      const expected = await listFiles(dir);
      const listed = await podman([
        ...runAs,
        "--entrypoint",
        "find",
        image,
        "/app",
        "-mindepth",
        "1",
        "!",
        "-type",
        "d",
      ]);
      expect(listed.code).toBe(0);
      const actual = listed.output
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.slice("/app/".length))
        .sort();
      expect(actual).toContain("dist/cli/operator.js");
      expect({
        onlyInImage: actual.filter((f) => !expected.includes(f)),
        onlyInDockerfile: expected.filter((f) => !actual.includes(f)),
      }).toEqual({ onlyInImage: [], onlyInDockerfile: [] });
      // Neither devkube nor a package only devkube needs (it is a devDependency: npm ci --omit=dev leaves it out).
      expect(actual.filter((f) => /devkube|^node_modules\/@(mds|marcbachmann)\//.test(f))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(runtimeDir, { recursive: true, force: true });
    }
  }, 180_000);

  it("is at most 200 MB uncompressed", async () => {
    const size = await podman(["image", "inspect", image, "--format", "{{.Size}}"]);
    expect(Number(size.output.trim())).toBeGreaterThan(100_000_000);
    expect(Number(size.output.trim())).toBeLessThanOrEqual(200_000_000);
  });

  it("has the Dockerfile's ENV, WORKDIR, USER and ENTRYPOINT", async () => {
    const inspect = await podman(["image", "inspect", image, "--format", "{{json .Config}}"]);
    expect(inspect.code).toBe(0);
    const config = JSON.parse(inspect.output) as {
      User: string;
      Env: string[];
      Entrypoint: string[];
      WorkingDir: string;
    };
    const operator = chain(dockerfile, stage(dockerfile, "operator"));
    const last = (keyword: string) => operator.filter((i) => i.keyword === keyword).at(-1)?.args;
    expect(config.User).toBe(last("USER"));
    expect(config.WorkingDir).toBe(last("WORKDIR"));
    expect(config.Entrypoint).toEqual(JSON.parse(last("ENTRYPOINT") ?? "null"));
    // The OCI labels name the release (docs/upgrade.md): package.json's version and the commit built.
    const labels = (JSON.parse(inspect.output) as { Labels?: Record<string, string> }).Labels ?? {};
    expect(labels).toMatchObject({ "org.opencontainers.image.version": version });
    expect(labels["org.opencontainers.image.revision"]).toMatch(/^([0-9a-f]{40}|unknown)$/);
    const envs = operator.filter((i) => i.keyword === "ENV").flatMap((i) => i.args.split(/\s+/));
    expect(envs.length).toBeGreaterThanOrEqual(4);
    // A build argument's value (MDS_COMMIT) is the build's: its name is checked, not its value.
    for (const e of envs)
      if (e.includes("${")) expect(config.Env.map((x) => x.split("=")[0])).toContain(e.split("=")[0]);
      else expect(config.Env).toContain(e);
  });

  it("is one layer: the tarball written beside it, whose sha256 is the layer's ID", async () => {
    const layers = await podman(["image", "inspect", image, "--format", "{{json .RootFS.Layers}}"]);
    const sha = (await readFile(join(out, `mds-${version}.tar.sha256`), "utf8")).split(" ")[0];
    expect(JSON.parse(layers.output)).toEqual([`sha256:${sha}`]);
    const tarball = createHash("sha256");
    for await (const chunk of createReadStream(join(out, `mds-${version}.tar`))) tarball.update(chunk as Buffer);
    expect(tarball.digest("hex")).toBe(sha);
  });

  it("runs as uid 65532 on a read-only root filesystem; uid 65532 owns nothing in it and no file is setuid or setgid", async () => {
    const result = await podman([
      ...runAs,
      "--entrypoint",
      "sh",
      image,
      "-c",
      "id -u; id -g; touch /app/x 2>&1; touch /x 2>&1; find / -xdev -user 65532 -print -quit 2>/dev/null",
    ]);
    expect(result.output.split("\n").slice(0, 4)).toEqual([
      "65532",
      "65532",
      "touch: cannot touch '/app/x': Read-only file system",
      "touch: cannot touch '/x': Read-only file system",
    ]);
    expect(result.output.split("\n")[4] ?? "").toBe("");
    // Owned by root and not writable by group or others: a writable mount would not make the image's files writable.
    const perms = await podman([
      ...runAs,
      "--entrypoint",
      "find",
      image,
      "/app",
      "/usr/local/bin/node",
      "!",
      "-type",
      "l",
      "(",
      "!",
      "-user",
      "0",
      "-o",
      "-perm",
      "/022",
      ")",
      "-print",
    ]);
    expect(perms).toEqual({ code: 0, output: "" });
    const setuid = await podman([
      ...runAs,
      "--entrypoint",
      "sh",
      image,
      "-c",
      "find / -xdev -type f -perm /6000 -print 2>/dev/null; true",
    ]);
    expect(setuid).toEqual({ code: 0, output: "" });
  });

  it("answers --help and --version, and says devkube is not in it", async () => {
    const help = await podman([...runAs, image, "--help"]);
    expect(help.code).toBe(0);
    expect(help.output).toContain("usage: mds operator");
    const mds = (args: string[]) => podman([...runAs, "--entrypoint", "node", image, "/app/bin/mds.js", ...args]);
    expect(await mds(["--version"])).toEqual({ code: 0, output: `${version}\n` });
    const usage = await mds(["--help"]);
    expect(usage.code).toBe(0);
    expect(usage.output).not.toMatch(/^\s+(dev|devkube)\s/m);
    const devkube = await mds(["devkube", "--dir", "/tmp/x"]);
    expect(devkube.code).toBe(2);
    expect(devkube.output).toContain('mds: "devkube" is a development and test tool and is not in this image');
    const node = await podman([...runAs, "--entrypoint", "node", image, "--version"]);
    expect(node.output).toMatch(/^v24\.\d+\.\d+\n$/);
  });

  it("writes a complete SBOM beside the tarball: every npm package in /app, Node, every Debian package", async () => {
    const bom = JSON.parse(await readFile(join(out, `mds-${version}.cdx.json`), "utf8")) as {
      components: { name: string; version: string; purl?: string; hashes?: { content: string }[] }[];
    };
    // The packages the bundle inlined, and every package.json of a node_modules in the image.
    const bundled = await podman([...runAs, "--entrypoint", "cat", image, "/app/dist/cli/operator.packages.json"]);
    const manifests = await podman([
      ...runAs,
      "--entrypoint",
      "sh",
      image,
      "-c",
      "find / -xdev -path '*/node_modules/*/package.json' -exec cat {} +",
    ]);
    const packages = [
      ...(JSON.parse(bundled.output) as { name: string; version: string }[]),
      ...[...manifests.output.matchAll(/^\{[\s\S]*?^\}/gm)]
        .map((m) => JSON.parse(m[0]) as { name?: string; version?: string })
        .filter((p) => p.name !== undefined && p.version !== undefined),
    ];
    expect(packages.map((p) => p.name)).toEqual(
      expect.arrayContaining(["prom-client", "pino", "undici", "zod", "yaml"]),
    );
    const purls = new Set(bom.components.map((c) => c.purl));
    const missing = packages
      .map((p) => `pkg:npm/${(p.name ?? "").replace(/^@/, "%40")}@${p.version}`)
      .filter((purl) => !purls.has(purl));
    expect(missing).toEqual([]);
    const node = await podman([...runAs, "--entrypoint", "node", image, "-p", "process.versions.node"]);
    const nodeComponent = bom.components.find((c) => c.name === "node");
    expect(nodeComponent?.version).toBe(node.output.trim());
    const binary = await readFile(join(out, "operator/rootfs/usr/local/bin/node"));
    expect(nodeComponent?.hashes?.[0]?.content).toBe(createHash("sha256").update(binary).digest("hex"));
    const dpkg = await podman([...runAs, "--entrypoint", "dpkg-query", image, "-W", "-f=${Package} ${Version}\n"]);
    const debs = dpkg.output.split("\n").filter((l) => l !== "");
    expect(debs.length).toBeGreaterThan(50);
    for (const line of debs) {
      const [name = "", v = ""] = line.split(" ");
      expect(
        bom.components.some((c) => c.name === name && c.version === v && c.purl?.startsWith("pkg:deb/debian/")),
      ).toBe(true);
    }
  });

  describe("the operator in the container", () => {
    let stack: Stack;
    let dir: string;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "mds-image-run-"));
      stack = await startStack({ dir: join(dir, "stack"), instanceId: "image-run" });
    }, 180_000);

    afterAll(async () => {
      await stack?.stop();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it("reconciles a Database against devkube and the service: Ready, and the Secret's DATABASE_URL connects", async () => {
      // As a Secret volume would give it: readable by the container's uid only, mounted read-only.
      const kubeconfig = join(dir, "kubeconfig");
      await writeFile(kubeconfig, await readFile(stack.operatorKubeconfigPath), { mode: 0o400 });
      await chown(kubeconfig, 65532, 65532);
      const name = `mds-image-run-${process.pid}`;
      const container = spawn(
        "podman",
        [
          ...runAs,
          "--name",
          name,
          "--network",
          "host",
          "--volume",
          `${kubeconfig}:/etc/mds/kubeconfig:ro`,
          "--env",
          "POD_NAMESPACE=mds-system",
          "--env",
          "POD_NAME=mds-operator-image-run",
          image,
          "--kubeconfig",
          "/etc/mds/kubeconfig",
          "--api-url",
          stack.operatorApiUrl,
          "--credentials-secret",
          "mds-system/mds-credentials",
          "--credentials-fallback-namespaces",
          "*",
          "--instance-id",
          "image-run",
          "--metrics-address",
          "127.0.0.1:0",
        ],
        { env, stdio: ["ignore", "pipe", "pipe"] },
      );
      const logs: Buffer[] = [];
      container.stdout.on("data", (b: Buffer) => logs.push(b));
      container.stderr.on("data", (b: Buffer) => logs.push(b));
      const exited = new Promise<number>((resolve) => container.on("close", (code) => resolve(code ?? 1)));
      try {
        const ok = (r: { code: number; stderr: string }) => expect(r.code, r.stderr).toBe(0);
        const k = (args: string[], input?: string) =>
          kubectl(args, { kubeconfig: stack.operatorKubeconfigPath, ...(input === undefined ? {} : { input }) });
        ok(await k(["create", "namespace", "shop"]));
        const manifests = [
          {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Project",
            metadata: { name: "shop", namespace: "shop" },
            spec: { displayName: "shop", deletionPolicy: "Delete" },
          },
          {
            apiVersion: "mds.dev/v1alpha1",
            kind: "Database",
            metadata: { name: "orders", namespace: "shop" },
            spec: { projectRef: { name: "shop" }, connectionSecret: { name: "orders-db" }, deletionPolicy: "Delete" },
          },
        ];
        ok(await k(["apply", "-f", "-"], manifests.map((m) => stringify(m)).join("---\n")));
        const wait = await k(["wait", "--for=condition=Ready", "-n", "shop", "mdsdb/orders", "--timeout=120s"]);
        expect({ wait, logs: Buffer.concat(logs).toString("utf8").slice(-3000) }).toMatchObject({ wait: { code: 0 } });
        const secret = await k(["get", "secret", "-n", "shop", "orders-db", "-o", "jsonpath={.data.DATABASE_URL}"]);
        expect(secret.code).toBe(0);
        const client = new pg.Client({ connectionString: Buffer.from(secret.stdout, "base64").toString("utf8") });
        await client.connect();
        try {
          expect((await client.query<{ one: number }>("select 1 as one")).rows[0]?.one).toBe(1);
        } finally {
          await client.end();
        }
      } finally {
        await run("podman", ["stop", "--time", "20", name], repoRoot, env);
      }
      // SIGTERM from podman stop: the operator lets go of its lease and exits 0.
      expect(await exited).toBe(0);
      expect(Buffer.concat(logs).toString("utf8")).not.toMatch(/Cannot find (module|package)|EROFS|EACCES/);
    }, 300_000);
  });
});
