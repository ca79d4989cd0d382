// `node scripts/image/operator-app.ts FROM TO`: the operator image's /app, taken from the full one (FROM: what the
// Dockerfile's runtime stage and scripts/build-image.sh assemble, the service image's /app). `mds operator` loads
// bin/mds.js, dist/cli/main.js, dist/cli/heap-flags.js, dist/operator/build-info.js (`--version`) and the bundle dist/cli/operator.js, which holds our modules
// and every npm package it imports (scripts/bundle-operator.ts); the one package it requires at run time instead is
// `yaml`, and only to read a kubeconfig file. `mds webhook` (the conversion webhook's Deployment runs this image) is
// bundled the same way, in dist/cli/webhook.js. So the operator image carries those files, package.json (it declares
// ESM and the version), dist/build-commit (the commit mds_build_info reports), the bundle's list of the packages it inlined (the SBOM reads it) and node_modules/yaml
// without its type declarations, source maps and READMEs: about 1 MB instead of 130 MB of node_modules. The other
// commands (`service`, `token`, `crds`) live in the service image. Run by the Dockerfile (operator-app stage), by
// scripts/build-image.sh and by test/deploy/image-files.ts; plain JavaScript syntax, so the base image's Node runs it.
import { cp, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/** The files `mds operator` loads, relative to /app. */
export const operatorFiles = [
  "package.json",
  "bin/mds.js",
  "dist/cli/main.js",
  "dist/cli/heap-flags.js",
  "dist/operator/build-info.js",
  "dist/cli/operator.js",
  "dist/cli/webhook.js",
  "dist/cli/operator.packages.json",
  "dist/build-commit",
];

/** The npm packages the bundle requires at run time rather than holding (scripts/bundle-operator.ts says why). */
export const operatorRuntimePackages = ["yaml"];

/** Neither loaded nor a licence: left out of the copied packages. */
const notShipped = /(\.d\.ts|\.d\.mts|\.d\.cts|\.map|\.md|\.markdown)$/i;

export async function operatorApp(from: string, to: string): Promise<void> {
  for (const file of operatorFiles) {
    await mkdir(dirname(join(to, file)), { recursive: true });
    await cp(join(from, file), join(to, file));
  }
  const packages = JSON.parse(await readFile(join(from, "dist/cli/operator.packages.json"), "utf8"));
  for (const name of operatorRuntimePackages) {
    await cp(join(from, "node_modules", name), join(to, "node_modules", name), {
      recursive: true,
      filter: (src) => !notShipped.test(src),
    });
    const { version } = JSON.parse(await readFile(join(from, "node_modules", name, "package.json"), "utf8"));
    packages.push({ name, version });
  }
  // Every npm package whose code the image holds, inlined or in node_modules: what the SBOM lists.
  await writeFile(join(to, "dist/cli/operator.packages.json"), `${JSON.stringify(packages, null, 2)}\n`);
}

if (import.meta.main) {
  const [from, to] = process.argv.slice(2);
  if (from === undefined || to === undefined) {
    console.error("usage: node scripts/image/operator-app.ts FROM_APP TO_APP");
    process.exit(2);
  }
  await operatorApp(from, to);
}
