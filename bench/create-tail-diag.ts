// Diagnostic: where does a slow create (POST → ready, concurrency 1) spend its time? Per create: POST → 201, 201 →
// job claimed, job run, job done → ready seen; spares left at POST; checkpoints and CREATE DATABASEs of the spare
// filler running meanwhile. Prints the slowest creates. Not part of npm run bench:service.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import pino from "pino";
import { startEmbeddedService } from "../src/service/embedded/stack.ts";

const n = Number(process.argv[2] ?? 60);
const settings = Object.fromEntries(process.argv.slice(3).map((a) => a.split("=", 2) as [string, string]));
const dir = await mkdtemp(path.join(os.tmpdir(), "mds-diag-"));
const service = await startEmbeddedService({
  dir,
  port: 0,
  logger: pino({ level: "silent" }),
  postgresSettings: settings,
  service: {
    ...(process.env.SPARES ? { spareDatabases: Number(process.env.SPARES) } : {}),
    rateLimit: { perSecond: 100_000, burst: 100_000 },
    jobPollIntervalMs: 50,
  },
});
const auth = { authorization: `Bearer ${service.token}`, "content-type": "application/json" };
const control = new pg.Pool({ connectionString: service.controlUrl, max: 2 });
const admin = new pg.Pool({ connectionString: `${service.postgres.url}?sslmode=disable`, max: 2 });
// Watches the server every 2 ms: is the spare filler's CREATE DATABASE running, and checkpoints.
let createDbSeen = 0;
let ownCreateSeen = 0;
let watching = true;
const watcher = (async () => {
  while (watching) {
    const { rows } = await admin.query<{ spare: number; own: number }>(
      "SELECT count(*) FILTER (WHERE query LIKE 'CREATE DATABASE \"mds_spare%')::int AS spare, count(*) FILTER (WHERE query LIKE 'CREATE DATABASE%' AND query NOT LIKE 'CREATE DATABASE \"mds_spare%')::int AS own FROM pg_stat_activity WHERE state = 'active'",
    );
    if (rows[0]!.spare > 0) createDbSeen++;
    if (rows[0]!.own > 0) ownCreateSeen++;
    await new Promise((r) => setTimeout(r, 2));
  }
})();
const project = (
  (await (
    await fetch(`${service.url}/v1/projects`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ name: "diag", createDatabase: false }),
    })
  ).json()) as { data: { id: string } }
).data;
// Start with the spares the filler keeps (SPARES, default 4) all made.
const target = Number(process.env.SPARES ?? 4);
for (let waited = 0; waited < 60_000; waited += 100) {
  const { rows } = await admin.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'",
  );
  if (rows[0]!.n >= target) break;
  await new Promise((r) => setTimeout(r, 100));
}
type Row = {
  own: number;
  i: number;
  total: number;
  post: number;
  claim: number;
  run: number;
  tail: number;
  spares: number;
  createDb: number;
  ckpt: number;
  walMb: number;
};
const out: Row[] = [];
for (let i = 0; i < n; i++) {
  const spares = (
    await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'")
  ).rows[0]!.n;
  const ck0 = (
    await admin.query<{ c: number; lsn: string }>(
      "SELECT (checkpoints_timed + checkpoints_req)::int AS c, pg_current_wal_lsn()::text AS lsn FROM pg_stat_bgwriter",
    )
  ).rows[0]!;
  createDbSeen = 0;
  ownCreateSeen = 0;
  const t0 = performance.now();
  const wall0 = Date.now();
  const res = await fetch(`${service.url}/v1/projects/${project.id}/databases`, {
    method: "POST",
    headers: auth,
    body: "{}",
  });
  const id = ((await res.json()) as { data: { id: string } }).data.id;
  const post = performance.now() - t0;
  for (;;) {
    const { rows } = await control.query<{ status: string }>("SELECT status FROM databases WHERE id = $1", [id]);
    if (rows[0]?.status === "ready") break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const total = performance.now() - t0;
  const { rows } = await control.query<{ started: Date }>(
    "SELECT r.started_at AS started FROM jobs j JOIN job_runs r ON r.job_id = j.id WHERE j.target_id = $1 AND j.kind = 'provision'",
    [id],
  );
  const ck1 = (
    await admin.query<{ c: number; mb: number }>(
      "SELECT (checkpoints_timed + checkpoints_req)::int AS c, (pg_current_wal_lsn() - $1::pg_lsn)::float / 1048576 AS mb FROM pg_stat_bgwriter",
      [ck0.lsn],
    )
  ).rows[0]!;
  const started = rows[0]!.started.getTime() - wall0;
  out.push({
    own: ownCreateSeen,
    i,
    total,
    post,
    claim: started - post,
    run: total - started,
    tail: 0,
    spares,
    createDb: createDbSeen,
    ckpt: ck1.c - ck0.c,
    walMb: ck1.mb,
  });
}
watching = false;
await watcher;
const f = (x: number) => x.toFixed(1).padStart(7);
const sorted = [...out].sort((a, b) => a.total - b.total);
const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!.total;
console.log(
  `n=${n} spares=${target} settings=${JSON.stringify(settings)} p50 ${pct(50).toFixed(1)} ms p90 ${pct(90).toFixed(1)} p99 ${pct(99).toFixed(1)} ms`,
);
console.log("   i   total    post   claim     run    tail spares fillerCDB ckpt walMB ownCDB");
for (const r of [...out].sort((a, b) => b.total - a.total).slice(0, 8))
  console.log(
    `${String(r.i).padStart(4)} ${f(r.total)} ${f(r.post)} ${f(r.claim)} ${f(r.run)} ${f(r.tail)} ${String(r.spares).padStart(6)} ${String(r.createDb).padStart(8)} ${String(r.ckpt).padStart(4)} ${r.walMb.toFixed(1).padStart(5)} ${r.own}`,
  );
const med = (k: keyof Row) => {
  const s = out.map((r) => r[k]).sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
console.log(
  `median: post ${med("post").toFixed(1)} claim ${med("claim").toFixed(1)} run ${med("run").toFixed(1)} tail ${med("tail").toFixed(1)} walMB ${med("walMb").toFixed(1)}`,
);
for (const [label, rs] of [
  ["renamed a spare", out.filter((r) => r.own === 0)],
  ["ran its own CREATE DATABASE", out.filter((r) => r.own > 0)],
] as const) {
  const t = rs.map((r) => r.total).sort((a, b) => a - b);
  console.log(
    `${label}: ${rs.length} creates, total p50 ${(t[Math.floor(t.length / 2)] ?? NaN).toFixed(1)} max ${(t[t.length - 1] ?? NaN).toFixed(1)} ms; filler's CREATE DATABASE seen during ${rs.filter((r) => r.createDb > 0).length}`,
  );
}
await control.end();
await admin.end();
await service.stop();
await rm(dir, { recursive: true, force: true });
