// node bench/create-ab.ts --before DIR [--after DIR] [--rounds N] [--spares N] [--max-ratio R]
// Service create latency (POST → ready) of two checkouts of this repository, measured in one interleaved run: each
// side is `mds service --embedded` started from its own checkout (its own PostgreSQL), both settled (spares made,
// CHECKPOINT), then creates alternate between them (the order flips every round), so the machine's load falls on both
// alike. Prints a table and exits 1 when after/before p50 exceeds --max-ratio (default 1.10). Typical use: a
// worktree of the commit before a change (`git worktree add /tmp/before <rev>`, node_modules linked) against this one.
// Never prints a token or a connection string.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

const arg = (name: string, fallback?: string) =>
  process.argv.find((_, i) => process.argv[i - 1] === `--${name}`) ?? fallback;
const before = arg("before");
const after = arg("after", fileURLToPath(new URL("..", import.meta.url)))!;
const rounds = Number(arg("rounds", "40"));
const spares = arg("spares", "16")!;
const maxRatio = Number(arg("max-ratio", "1.10"));
if (before === undefined || !existsSync(path.join(before, "bin/mds.js"))) {
  console.error(
    "usage: node bench/create-ab.ts --before DIR [--after DIR] [--rounds N] [--spares N] [--max-ratio R] (DIR: a checkout with node_modules)",
  );
  process.exit(2);
}

interface Side {
  name: string;
  child: ChildProcess;
  dir: string;
  url: string;
  token: string;
  adminUrl: string;
  projectId: string;
  ready: number[];
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

async function start(name: string, checkout: string): Promise<Side> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `mds-ab-${name}-`));
  const child = spawn(
    process.execPath,
    [
      path.join(checkout, "bin/mds.js"),
      "service",
      "--embedded",
      dir,
      "--port",
      "0",
      "--spare-databases",
      spares,
      "--log-level",
      "warn",
    ],
    {
      cwd: checkout,
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const file = path.join(dir, "service.json");
  for (let i = 0; !existsSync(file); i++) {
    if (i > 1200 || child.exitCode !== null) throw new Error(`${name}: the service did not start`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 200));
  const { url, token } = JSON.parse(await readFile(file, "utf8")) as { url: string; token: string };
  // The embedded service's control database, as its superuser (the same server holds the regions' databases).
  const { controlUrl } = JSON.parse(await readFile(path.join(dir, "control.json"), "utf8")) as { controlUrl: string };
  const side: Side = { name, child, dir, url, token, adminUrl: controlUrl, projectId: "", ready: [] };
  side.projectId = (
    await call(side, "POST", "/v1/projects", { name: `ab-${name}`, region: "us-east-1", createDatabase: false })
  ).id;
  return side;
}

async function call(side: Side, method: string, p: string, body?: unknown): Promise<{ id: string; status: string }> {
  const res = await fetch(`${side.url}${p}`, {
    method,
    headers: { authorization: `Bearer ${side.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status >= 300) throw new Error(`${side.name}: ${method} ${p} answered ${res.status}`);
  const text = await res.text();
  return text === "" ? { id: "", status: "" } : (JSON.parse(text) as { data: { id: string; status: string } }).data;
}

async function createOnce(side: Side): Promise<void> {
  const t0 = performance.now();
  const { id } = await call(side, "POST", `/v1/projects/${side.projectId}/databases`, {});
  for (;;) {
    if ((await call(side, "GET", `/v1/databases/${id}`)).status === "ready") break;
    await new Promise((r) => setTimeout(r, 5));
  }
  side.ready.push(performance.now() - t0);
  await call(side, "DELETE", `/v1/databases/${id}`);
}

/** Both sides settled: their spare pools full (the filler yields to creates, so wait for it), then a checkpoint. */
async function settle(side: Side): Promise<void> {
  const c = new pg.Client({ connectionString: side.adminUrl });
  await c.connect();
  try {
    for (let i = 0; i < 600; i++) {
      const { rows } = await c.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds\\_spare\\_%'",
      );
      if (rows[0]!.n >= Number(spares)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    await c.query("CHECKPOINT");
  } finally {
    await c.end();
  }
}

const sides = [await start("before", before), await start("after", after)];
try {
  await Promise.all(sides.map(settle));
  // Warm-up: the first creates of a process pay for module compilation and pool set-up.
  for (const side of sides) for (let i = 0; i < 3; i++) await createOnce(side);
  for (const side of sides) side.ready.length = 0;
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) await createOnce(side);
    // The deletes queue drop jobs; let the spare filler and the drops run between rounds as on a quiet service.
    if (round % 10 === 9) await Promise.all(sides.map(settle));
  }
  const [b, a] = sides as [Side, Side];
  const ratio = percentile(a.ready, 50) / percentile(b.ready, 50);
  const rows = [
    ["side", "n", "p50 ms", "p90 ms", "p99 ms"],
    ...sides.map((s) => [
      s.name,
      String(s.ready.length),
      percentile(s.ready, 50).toFixed(1),
      percentile(s.ready, 90).toFixed(1),
      percentile(s.ready, 99).toFixed(1),
    ]),
  ];
  for (const r of rows) console.log(r.map((c, i) => (i === 0 ? c.padEnd(8) : c.padStart(8))).join(" "));
  console.log(
    `after/before p50: ${ratio.toFixed(2)}× (target ≤ ${maxRatio.toFixed(2)}×), p99: ${(percentile(a.ready, 99) / percentile(b.ready, 99)).toFixed(2)}×; load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  process.exitCode = ratio <= maxRatio ? 0 : 1;
} finally {
  for (const side of sides) side.child.kill("SIGTERM");
  await Promise.all(
    sides.map((s) => new Promise((r) => (s.child.exitCode !== null ? r(undefined) : s.child.once("exit", r)))),
  );
  for (const side of sides) await rm(side.dir, { recursive: true, force: true });
}
