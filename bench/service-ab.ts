// node bench/service-ab.ts --baseline DIR [--creates 60] [--restores 5] [--restore-mb 30]
// Create and restore timings of this tree's service against another checkout's (DIR: e.g. a `git worktree add` of an
// older commit), in ONE run: both services start side by side, each on its own embedded PostgreSQL, and every
// measurement alternates between them (A, B, B, A, …), so load from anything else on the machine hits both alike.
// Prints a table with the ratio new / baseline. Used to show that the tenant hardening did not slow creates.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import pino from "pino";
import { sql } from "./processes.ts";

const { values } = parseArgs({
  options: {
    baseline: { type: "string" },
    creates: { type: "string", default: "60" },
    restores: { type: "string", default: "5" },
    "restore-mb": { type: "string", default: "30" },
  },
});
if (!values.baseline) {
  console.error("usage: node bench/service-ab.ts --baseline DIR (a checkout of the commit to compare against)");
  process.exit(2);
}
const creates = Number(values.creates);
const restores = Number(values.restores);
const restoreMb = Number(values["restore-mb"]);

type Embedded = { url: string; token: string; controlUrl: string; stop(): Promise<void> };
type Side = {
  name: string;
  service: Embedded;
  status: pg.Pool;
  projectId: string;
  dir: string;
  create: number[];
  restore: number[];
};

async function start(name: string, root: string): Promise<Side> {
  const { startEmbeddedService } = (await import(pathToFileURL(path.join(root, "src/service/index.ts")).href)) as {
    startEmbeddedService(o: object): Promise<Embedded>;
  };
  const dir = await mkdtemp(path.join(os.tmpdir(), `mds-ab-${name}-`));
  // Durability on (fsync), as a deployment runs: the figures a user sees.
  const service = await startEmbeddedService({
    dir,
    port: 0,
    logger: pino({ level: "silent" }),
    service: { rateLimit: { perSecond: 100_000, burst: 100_000 }, jobPollIntervalMs: 50 },
  });
  const side: Side = {
    name,
    service,
    status: new pg.Pool({ connectionString: service.controlUrl, max: 2 }),
    projectId: "",
    dir,
    create: [],
    restore: [],
  };
  side.projectId = (await call(side, "POST", "/v1/projects", { name: "bench", createDatabase: false })).id as string;
  return side;
}

async function call(side: Side, method: string, p: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${side.service.url}${p}`, {
    method,
    headers: { authorization: `Bearer ${side.service.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await res.json()) as { data: Record<string, unknown> };
  if (res.status >= 300) throw new Error(`${side.name} ${method} ${p}: ${res.status}`);
  return json.data;
}

// Readiness is read from the control database: an HTTP poll loop at 5 ms would itself load the two cores.
async function untilReady(side: Side, id: string): Promise<void> {
  for (;;) {
    const { rows } = await side.status.query<{ status: string }>("SELECT status FROM databases WHERE id = $1", [id]);
    if (rows[0]?.status === "ready") return;
    if (rows[0]?.status === "failure") throw new Error(`${side.name}: database ${id} failed`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)] ?? NaN;
const ms = (x: number) => `${x.toFixed(1)} ms`;
/** A, B, B, A, A, B, …: neither side always goes first. */
const order = <T>(pair: [T, T], i: number): [T, T] => (i % 2 === 0 ? pair : [pair[1], pair[0]]);

const base = await start("baseline", path.resolve(values.baseline));
const head = await start("new", path.resolve(import.meta.dirname, ".."));
try {
  for (let i = 0; i < creates; i++) {
    for (const side of order([base, head], i)) {
      const t0 = performance.now();
      const db = await call(side, "POST", `/v1/projects/${side.projectId}/databases`, {});
      await untilReady(side, db.id as string);
      side.create.push(performance.now() - t0);
    }
  }
  const targets = new Map<Side, { id: string; backupId: string }>();
  for (const side of [base, head]) {
    const db = await call(side, "POST", `/v1/projects/${side.projectId}/databases`, { name: "big" });
    await untilReady(side, db.id as string);
    await sql(
      db.connectionString as string,
      "CREATE TABLE big AS SELECT g AS id, md5(g::text) || md5((g * 7)::text) AS a, g % 1000 AS b FROM generate_series(1, $1::int) g",
      [restoreMb * 9_000],
    );
    await sql(db.connectionString as string, "CREATE INDEX big_b ON big (b)");
    const backup = await call(side, "POST", `/v1/databases/${db.id as string}/backups`);
    for (;;) {
      const list = (await fetch(`${side.service.url}/v1/databases/${db.id as string}/backups`, {
        headers: { authorization: `Bearer ${side.service.token}` },
      }).then((r) => r.json())) as { data: { id: string; status: string }[] };
      if (list.data.find((b) => b.id === backup.id)?.status === "completed") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    targets.set(side, { id: db.id as string, backupId: backup.id as string });
  }
  for (let i = 0; i < restores; i++) {
    for (const side of order([base, head], i)) {
      const t = targets.get(side)!;
      const t0 = performance.now();
      await call(side, "POST", `/v1/databases/${t.id}/restore`, {
        source: { type: "backup", databaseId: t.id, backupId: t.backupId },
      });
      await untilReady(side, t.id);
      side.restore.push(performance.now() - t0);
    }
  }
} finally {
  for (const side of [base, head]) {
    await side.status.end();
    await side.service.stop();
    await rm(side.dir, { recursive: true, force: true });
  }
}

const ratio = (f: (xs: number[]) => number, key: "create" | "restore") =>
  `${(f(head[key]) / f(base[key])).toFixed(2)}×`;
const p50 = (xs: number[]) => percentile(xs, 50);
const p99 = (xs: number[]) => percentile(xs, 99);
const rows = [
  [`create, POST → ready, p50 (n=${creates} each)`, ms(p50(base.create)), ms(p50(head.create)), ratio(p50, "create")],
  [`create, POST → ready, p99`, ms(p99(base.create)), ms(p99(head.create)), ratio(p99, "create")],
  [
    `restore of a ${restoreMb} MB table, POST → ready, median (n=${restores} each)`,
    ms(p50(base.restore)),
    ms(p50(head.restore)),
    ratio(p50, "restore"),
  ],
];
console.log(
  [
    "| measure | baseline | new | new / baseline |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n"),
);
const [load1] = os.loadavg();
console.log(
  `\nmachine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "?"}, Node ${process.version}; load average at the end ${load1!.toFixed(1)}`,
);
