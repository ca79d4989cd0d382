import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

// devkube's own CPU at startup, idle, and under writes of a kind no controller follows (ConfigMaps): what the
// workload controllers add when no workload object exists. `node packages/devkube/bench/idle.ts [devkube index]`
// (another checkout's packages/devkube/src/index.ts measures the version before). Run under
// `flock /tmp/mds-bench.lock`.

process.env["NODE_TLS_REJECT_UNAUTHORIZED"] = "0";
const entry = process.argv[2] ?? new URL("../src/index.ts", import.meta.url).pathname;
const { startDevkube } = (await import(entry)) as typeof import("../src/index.ts");

const ms = (u: NodeJS.CpuUsage) => ((u.user + u.system) / 1000).toFixed(0);
const rounds = 5;
const rows: string[][] = [];
for (let r = 0; r < rounds; r++) {
  const dir = mkdtempSync(path.join(tmpdir(), "devkube-idle-"));
  let t = process.cpuUsage();
  const kube = await startDevkube({ dir, port: 0 });
  const start = process.cpuUsage(t);
  t = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const idle = process.cpuUsage(t);
  const headers = { authorization: `Bearer ${kube.token}`, "content-type": "application/json" };
  t = process.cpuUsage();
  for (let i = 0; i < 300; i++)
    await fetch(`${kube.url}/api/v1/namespaces/default/configmaps`, {
      method: "POST",
      headers,
      body: JSON.stringify({ metadata: { name: `c${i}` }, data: { a: "b" } }),
    });
  const writes = process.cpuUsage(t);
  await kube.stop();
  rmSync(dir, { recursive: true, force: true });
  rows.push([ms(start), ms(idle), ms(writes)]);
}
const median = (i: number) => rows.map((r) => Number(r[i])).sort((a, b) => a - b)[Math.floor(rounds / 2)];
console.log(`startup (first start, fresh dir): ${median(0)} ms CPU`);
console.log(`idle 5 s: ${median(1)} ms CPU`);
console.log(`300 ConfigMap creates over HTTPS: ${median(2)} ms CPU`);
