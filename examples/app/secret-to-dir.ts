// Writes a Secret's keys as files into a directory, as the kubelet does for a Secret volume, so the app
// example runs on a laptop exactly as in a pod:
//
//   node examples/app/secret-to-dir.ts orders-db /tmp/orders-db
//   SECRET_DIR=/tmp/orders-db node examples/app/app.ts
//
// Uses kubectl with the current KUBECONFIG (`source .mds/env` after `npm start`).
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [name, dir] = process.argv.slice(2);
if (!name || !dir) {
  console.error("usage: node examples/app/secret-to-dir.ts <secret-name> <directory> [namespace]");
  process.exit(2);
}
const namespace = process.argv[4] ?? "default";
const kubectl = process.env.KUBECTL ?? "kubectl";
const json = execFileSync(kubectl, ["get", "secret", name, "-n", namespace, "-o", "json"], { encoding: "utf8" });
const data = (JSON.parse(json) as { data?: Record<string, string> }).data ?? {};
mkdirSync(dir, { recursive: true, mode: 0o700 });
for (const [key, value] of Object.entries(data)) {
  const file = join(dir, key);
  writeFileSync(file, Buffer.from(value, "base64"));
  chmodSync(file, 0o600);
}
console.log(`wrote ${Object.keys(data).length} keys of secret ${namespace}/${name} to ${dir}`);
