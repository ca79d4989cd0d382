// node bench/tenant-guard.ts: what the tenant guard (src/service/guard/tenant-guard.ts) costs. With 100 tenant sessions
// open on the server (five databases, twenty sessions each): the time of one guard pass, and the create latency
// (POST → ready, concurrency 1) in blocks that alternate, in one run on one server, between no guard, the guard at
// its default interval and the guard at 100 ms (twenty times as often). Prints a table; records nothing.
// On a loaded machine compare the median of per-round ratios: the load drifts between rounds.
// `--rounds n` (default 6; each runs the three modes, in an order that turns), `--creates n` (per block, default 15).
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import pino from "pino";
import { startEmbeddedService } from "../src/service/embedded/stack.ts";
import { serverStateSql, startTenantGuard, type TenantGuard } from "../src/service/guard/tenant-guard.ts";

const arg = (name: string, fallback: number) =>
  Number(process.argv.find((_, i) => process.argv[i - 1] === name) ?? fallback);
const rounds = arg("--rounds", 6);
const perBlock = arg("--creates", 15);
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

const dir = await mkdtemp(path.join(os.tmpdir(), "mds-bench-guard-"));
const logger = pino({ level: "silent" });
// The service's own guard never ticks here: the bench starts and stops one of its own around each block.
const service = await startEmbeddedService({
  dir,
  port: 0,
  logger,
  regionSettings: { workspaceConnectionLimit: 1000 },
  service: {
    rateLimit: { perSecond: 100_000, burst: 100_000 },
    tenantGuardIntervalMs: 3_600_000,
    spareDatabases: 2 * perBlock,
  },
});
const sessions: pg.Client[] = [];
const statusPool = new pg.Pool({ connectionString: service.controlUrl, max: 2 });
try {
  const auth = { authorization: `Bearer ${service.token}`, "content-type": "application/json" };
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${service.url}${p}`, {
      method,
      headers: auth,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await res.json()) as {
      data: {
        id: string;
        database?: { id: string; connections: { endpoints: { direct: { connectionString: string } } }[] };
      };
    };
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status}`);
    return json.data;
  };
  const untilReady = async (id: string) => {
    for (;;) {
      const { rows } = await statusPool.query<{ status: string }>("SELECT status FROM databases WHERE id = $1", [id]);
      if (rows[0]?.status === "ready") return;
      if (rows[0]?.status === "failure") throw new Error(`database ${id} failed`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const settle = async () => {
    const count = async () =>
      (
        await service.deps.servers
          .get("us-east-1")![0]!
          .pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'")
      ).rows[0]!.n;
    while ((await count()) < 2 * perBlock) await new Promise((r) => setTimeout(r, 50));
    await service.deps.servers.get("us-east-1")![0]!.pool.query("CHECKPOINT");
  };

  // The load the guard looks at: 100 tenant sessions (each database's twenty are within its limits: nothing is ended).
  for (let d = 0; d < 5; d++) {
    const created = await call("POST", "/v1/projects", { name: `load-${d}` });
    await untilReady(created.database!.id);
    const url = created.database!.connections[0]!.endpoints.direct.connectionString;
    for (let i = 0; i < 20; i++) {
      const c = new pg.Client({ connectionString: url });
      c.on("error", () => {});
      await c.connect();
      sessions.push(c);
    }
  }
  const project = await call("POST", "/v1/projects", { name: "bench", createDatabase: false });

  // One guard pass, alone.
  const probe = startTenantGuard({
    config: { ...service.deps.config, tenantGuardIntervalMs: 3_600_000 },
    control: service.deps.pool,
    servers: service.deps.servers,
    logger,
  });
  const passes: number[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    await probe.tick();
    passes.push(performance.now() - t0);
  }
  const cpuPerPass = (({ user, system }) => (user + system) / 1000 / 200)(process.cpuUsage(cpu));
  await probe.stop();
  const plan = await service.deps.servers
    .get("us-east-1")![0]!
    .pool.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, TIMING OFF) ${serverStateSql}`, [[40]]);
  const serverMs = /Execution Time: ([\d.]+)/.exec(plan.rows.map((r) => r["QUERY PLAN"]).join("\n"))?.[1];

  const modes = { "no guard": undefined, "guard every 2000 ms": 2000, "guard every 100 ms": 100 } as const;
  const ready: Record<string, number[]> = Object.fromEntries(Object.keys(modes).map((k) => [k, []]));
  // Per round, each mode's p50 over that mode's p50 without the guard in the same round: the machine's load drifts.
  const ratios: Record<string, number[]> = Object.fromEntries(Object.keys(modes).map((k) => [k, []]));
  const entries = Object.entries(modes);
  for (let round = 0; round < rounds; round++) {
    const block: Record<string, number[]> = {};
    // The order turns every round, so no mode always runs first after the pause.
    for (const [mode, intervalMs] of entries.map((_, i) => entries[(i + round) % entries.length]!)) {
      block[mode] = [];
      await settle();
      let guard: TenantGuard | undefined;
      if (intervalMs !== undefined)
        guard = startTenantGuard({
          config: { ...service.deps.config, tenantGuardIntervalMs: intervalMs },
          control: service.deps.pool,
          servers: service.deps.servers,
          logger,
        });
      for (let i = 0; i < perBlock; i++) {
        const t0 = performance.now();
        const db = await call("POST", `/v1/projects/${project.id}/databases`, {});
        await untilReady(db.id);
        ready[mode]!.push(performance.now() - t0);
        block[mode].push(performance.now() - t0);
      }
      await guard?.stop();
      console.error(`round ${round + 1}/${rounds}: ${mode} p50 ${ms(percentile(block[mode], 50))}`);
    }
    for (const mode of Object.keys(modes))
      ratios[mode]!.push(percentile(block[mode]!, 50) / percentile(block["no guard"]!, 50));
  }

  const base = percentile(ready["no guard"]!, 50);
  const table: [string, string][] = [
    [
      "guard pass over 100 tenant sessions (n=200)",
      `p50 ${ms(percentile(passes, 50))}, p99 ${ms(percentile(passes, 99))}; service CPU ${ms(cpuPerPass)} per pass; the server statement ${serverMs} ms`,
    ],
    ...Object.entries(ready).map(([mode, xs]): [string, string] => [
      `create POST → ready, ${mode} (n=${xs.length})`,
      `p50 ${ms(percentile(xs, 50))} (${(percentile(xs, 50) / base).toFixed(3)}×; median of per-round ratios ${percentile(ratios[mode]!, 50).toFixed(3)}×), p99 ${ms(percentile(xs, 99))}`,
    ]),
  ];
  for (const [what, value] of table) console.log(`| ${what} | ${value} |`);
} finally {
  for (const c of sessions) await c.end().catch(() => {});
  await statusPool.end();
  await service.stop();
  await rm(dir, { recursive: true, force: true });
}
