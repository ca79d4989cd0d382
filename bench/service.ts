// npm run bench:service: create latency and throughput, list latency over 10,000 databases, restore time of a
// 100 MB database against a plain `pg_dump | pg_restore` and against `pg_restore -j2` of the same stored archive,
// the data plane (connect-and-query through PgBouncer against direct, 1,000 pooled clients at once) and creates with
// TLS on against a stack without it. Prints a table and records the run in bench/history/<date>-service.md (its
// figures then go into BENCHMARKS.md's table by hand). `--quick` shrinks every size (for a smoke run); `--no-write`
// records nothing; `--only a,b` runs only
// those parts of creates, list, restore, pooler, tls (then nothing is recorded).
// Never prints a password or a connection string: endpoints appear as host, port and sslmode.
import { spawn } from "node:child_process";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import pino from "pino";
import { startPostgres } from "../src/postgres/index.ts";
import { openArchive } from "../src/service/jobs/backup-archive.ts";
import { randomBytes } from "node:crypto";
import { startEmbeddedService } from "../src/service/embedded/stack.ts";
import { startService } from "../src/service/start/service.ts";
import { createServiceToken } from "../src/service/domain/tokens.ts";
import { sql, run } from "./processes.ts";

const quick = process.argv.includes("--quick");
const onlyArg = process.argv.find((a, i) => process.argv[i - 1] === "--only");
const only = onlyArg ? new Set(onlyArg.split(",")) : undefined;
const runs = (part: "creates" | "list" | "restore" | "pooler" | "tls") => {
  const yes = only?.has(part) ?? true;
  // Progress on stderr: a full run takes minutes on a loaded machine.
  if (yes) console.error(`${new Date().toISOString().slice(11, 19)} ${part}`);
  return yes;
};
const write = !process.argv.includes("--no-write") && only === undefined;
const sizes = quick
  ? { serial: 10, parallel: 20, list: 1000, listRequests: 50, restoreMb: 10 }
  : { serial: 60, parallel: 120, list: 10_000, listRequests: 300, restoreMb: 100 };

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

const dir = await mkdtemp(path.join(os.tmpdir(), "mds-bench-"));
// Durability stays on (fsync): these are the numbers a real deployment sees.
// Silent, but for the restore job's own timing of its steps (its debug record "restore swapped"), switched on only
// around the restores so the per-request debug lines cost the other measurements nothing.
const restoreSteps: { prepareMs: number; pgRestoreMs: number; swapMs: number }[] = [];
const logger = pino(
  { level: "silent" },
  {
    write(line: string) {
      const record = JSON.parse(line) as { msg?: string; prepareMs: number; pgRestoreMs: number; swapMs: number };
      if (record.msg === "restore swapped")
        restoreSteps.push({ prepareMs: record.prepareMs, pgRestoreMs: record.pgRestoreMs, swapMs: record.swapMs });
    },
  },
);
// `--spares n`: the spare databases the service keeps per server (default: the service's own default).
const sparesArg = process.argv.find((a, i) => process.argv[i - 1] === "--spares");
const service = await startEmbeddedService({
  dir,
  port: 0,
  logger,
  service: {
    rateLimit: { perSecond: 100_000, burst: 100_000 },
    // The pooler and TLS measurements mint a login per sample: more than a workspace's production 100 live ones.
    connectionsPerWorkspace: 10_000,
    ...(sparesArg ? { spareDatabases: Number(sparesArg) } : {}),
  },
});
const auth = { authorization: `Bearer ${service.token}`, "content-type": "application/json" };
async function call(method: string, p: string, body?: unknown) {
  const res = await fetch(`${service.url}${p}`, {
    method,
    headers: auth,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await res.json()) as { data: { id: string; status: string; connectionString?: string } };
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
// Readiness is read from the control database: four HTTP poll loops at 5 ms would themselves load the two cores.
const statusPool = new pg.Pool({ connectionString: service.controlUrl, max: 4 });
// Every `everyMs`: 5 ms for creates (tens of ms each); a restore takes seconds, and polling it every 5 ms would cost it
// CPU the baseline it is compared with (a pg_restore awaited to its exit) does not pay.
async function untilReady(id: string, everyMs = 5) {
  for (;;) {
    const { rows } = await statusPool.query<{ status: string }>("SELECT status FROM databases WHERE id = $1", [id]);
    const status = rows[0]?.status;
    if (status === "ready") return;
    if (status === "failure") throw new Error(`database ${id} failed`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

// Before each measurement: the spare databases made, as on a service that has been up (a fresh one makes them first,
// and the filler refills after each burst or job: its CREATE DATABASEs would otherwise run beside the next one); then
// a CHECKPOINT, so no side pays for the dirty buffers of the one before (a checkpoint forced by max_wal_size lands on
// whichever side runs when it is due).
async function settle(adminUrl = service.postgres.url) {
  const target = service.deps.config.spareDatabases;
  const started = performance.now();
  const made = async () =>
    (
      (await sql(adminUrl, "SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds_spare_%'")) as {
        n: number;
      }[]
    )[0]!.n;
  while ((await made()) < target) await new Promise((r) => setTimeout(r, 50));
  console.error(`${target} spare databases made (waited ${ms(performance.now() - started)})`);
  await sql(adminUrl, "CHECKPOINT");
}

const rows: [string, string, string][] = [];
try {
  const project = (await call("POST", "/v1/projects", { name: "bench", createDatabase: false })).data;

  // Create: the 201 (rows, credentials, job queued) and the time until the database is ready (exists, roles, grants).
  async function creates(total: number, concurrency: number) {
    const post: number[] = [];
    const ready: number[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          next++;
          const t0 = performance.now();
          const db = (await call("POST", `/v1/projects/${project.id}/databases`, {})).data;
          post.push(performance.now() - t0);
          await untilReady(db.id);
          ready.push(performance.now() - t0);
        }
      }),
    );
    return { post, ready, perSecond: total / ((performance.now() - started) / 1000) };
  }
  // Creates are measured on a service that has been up: its spare databases made (a fresh one makes them first).
  for (const [total, concurrency] of runs("creates")
    ? ([
        [sizes.serial, 1],
        [sizes.parallel, 4],
      ] as const)
    : []) {
    await settle();
    const r = await creates(total, concurrency);
    rows.push([
      `create database, concurrency ${concurrency} (n=${total}): POST → 201`,
      `p50 ${ms(percentile(r.post, 50))}, p99 ${ms(percentile(r.post, 99))}`,
      "",
    ]);
    rows.push([
      `create database, concurrency ${concurrency}: POST → ready`,
      `p50 ${ms(percentile(r.ready, 50))}, p99 ${ms(percentile(r.ready, 99))}`,
      concurrency === 1 ? "aim p50 ≤ 120 ms, p99 ≤ 400 ms" : "",
    ]);
    rows.push([
      `creates per second to ready, concurrency ${concurrency}`,
      `${r.perSecond.toFixed(1)} /s`,
      concurrency === 4 ? "aim ≥ 15/s" : "",
    ]);
  }

  // List: 10,000 databases in the control database (rows only: 10,000 real PostgreSQL databases would need ~70 GB).
  if (runs("list")) {
    const workspaceId = (
      (await sql(service.controlUrl, "SELECT workspace_id FROM projects WHERE id = $1", [project.id])) as {
        workspace_id: string;
      }[]
    )[0]!.workspace_id;
    await sql(
      service.controlUrl,
      `WITH g AS (SELECT i, 'db_cbench' || lpad(i::text, 20, '0') AS id, 'con_cbench' || lpad(i::text, 20, '0') AS con FROM generate_series(1, $3::int) i),
       d AS (INSERT INTO databases (id, project_id, workspace_id, name, region, status, pg_name, owner_role, default_connection_id, created_at)
             SELECT id, $1, $2, 'bench-' || i, 'us-east-1', 'ready', 'bench_' || i, 'bench_' || i || '_owner', con, now() - (i || ' ms')::interval FROM g RETURNING 1)
     INSERT INTO connections (id, database_id, name, role_name, verifier) SELECT con, id, 'default', 'bench_role_' || i, 'x' FROM g`,
      [project.id, workspaceId, sizes.list],
    );
    await sql(service.controlUrl, "ANALYZE");
    const pages: number[] = [];
    const cursors: (string | null)[] = [null];
    for (let i = 0; i < sizes.listRequests; i++) {
      const cursor = cursors[Math.floor(Math.random() * cursors.length)] ?? null;
      const t0 = performance.now();
      const res = await fetch(`${service.url}/v1/databases?limit=100${cursor ? `&cursor=${cursor}` : ""}`, {
        headers: auth,
      });
      const page = (await res.json()) as { pagination: { nextCursor: string | null } };
      pages.push(performance.now() - t0);
      if (page.pagination.nextCursor && cursors.length < 100) cursors.push(page.pagination.nextCursor);
    }
    rows.push([
      `list page (limit 100) over ${sizes.list.toLocaleString("en")} databases (n=${sizes.listRequests})`,
      `p50 ${ms(percentile(pages, 50))}, p99 ${ms(percentile(pages, 99))}`,
      "aim p99 ≤ 30 ms",
    ]);
    const walk0 = performance.now();
    let cursor: string | null = null;
    let walked = 0;
    do {
      const res = await fetch(`${service.url}/v1/databases?limit=100${cursor ? `&cursor=${cursor}` : ""}`, {
        headers: auth,
      });
      const page = (await res.json()) as { data: unknown[]; pagination: { nextCursor: string | null } };
      walked += page.data.length;
      cursor = page.pagination.nextCursor;
    } while (cursor);
    rows.push([
      `full walk of ${walked.toLocaleString("en")} databases, 100 per page`,
      ms(performance.now() - walk0),
      "",
    ]);
    await sql(
      service.controlUrl,
      "DELETE FROM connections WHERE id LIKE 'con_cbench%'; DELETE FROM databases WHERE id LIKE 'db_cbench%'",
    );
  }

  if (runs("pooler")) await poolerBench(project.id);
  if (runs("tls")) await tlsBench(project.id);

  // Restore of a ~100 MB database against a plain pg_dump | pg_restore of the same data, and against a plain
  // `pg_restore -j2` of the very archive the service restores from.
  if (runs("restore")) {
    const target = (await call("POST", `/v1/projects/${project.id}/databases`, { name: "big" })).data;
    await untilReady(target.id);
    const url = target.connectionString!;
    await sql(
      url,
      `CREATE TABLE big AS SELECT g AS id, md5(g::text) || md5((g * 7)::text) AS a, g % 1000 AS b, now() AS c FROM generate_series(1, $1::int) g`,
      [Math.round(sizes.restoreMb * 9_000)],
    );
    await sql(url, "CREATE INDEX big_b ON big (b)");
    const size = (
      (await sql(url, "SELECT pg_database_size(current_database())::bigint AS size")) as { size: string }[]
    )[0]!.size;
    const backup = (await call("POST", `/v1/databases/${target.id}/backups`)).data;
    for (;;) {
      const list = (await call("GET", `/v1/databases/${target.id}/backups`)) as unknown as {
        data: { id: string; status: string }[];
      };
      if (list.data.find((b) => b.id === backup.id)?.status === "completed") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await settle();
    logger.level = "debug";
    const r0 = performance.now();
    await call("POST", `/v1/databases/${target.id}/restore`, {
      source: { type: "backup", databaseId: target.id, backupId: backup.id },
    });
    await untilReady(target.id, 25);
    const restoreMs = performance.now() - r0;

    const admin = new URL(service.postgres.url);
    const env = {
      PGHOST: admin.hostname,
      PGPORT: admin.port,
      PGUSER: "postgres",
      PGPASSWORD: decodeURIComponent(admin.password),
    };
    const pgName = new URL(url).pathname.slice(1);
    await settle();
    await sql(service.postgres.url, "CREATE DATABASE bench_plain");
    const p0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const dump = spawn(path.join(service.postgres.bindir, "pg_dump"), ["-Fc", "-d", pgName], {
        env,
        stdio: ["ignore", "pipe", "inherit"],
      });
      const restore = spawn(path.join(service.postgres.bindir, "pg_restore"), ["--no-owner", "-d", "bench_plain"], {
        env,
        stdio: ["pipe", "inherit", "inherit"],
      });
      dump.stdout.pipe(restore.stdin);
      restore.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`pg_restore exit ${code}`))));
    });
    const plainMs = performance.now() - p0;
    await sql(service.postgres.url, "DROP DATABASE bench_plain");
    const mb = Number(size) / 1024 / 1024;
    rows.push([`restore of a ${mb.toFixed(0)} MB database: POST restore → ready`, ms(restoreMs), ""]);
    rows.push([`plain pg_dump -Fc piped into pg_restore, same data`, ms(plainMs), ""]);
    rows.push(["restore / plain dump+restore", `${(restoreMs / plainMs).toFixed(2)}×`, "aim ≤ 1.2×"]);

    // The baseline of the same archive: decrypted to a file first (untimed: pg_restore -j needs a seekable file), then
    // `pg_restore -j2` into a fresh database, as the superuser. Alternated with the service's restore, five of each.
    const stored = (
      (await sql(service.controlUrl, "SELECT path FROM backups WHERE id = $1", [backup.id])) as { path: string }[]
    )[0]!.path;
    const plainFile = path.join(dir, "plain.dump");
    await pipeline(
      openArchive(createReadStream(stored), service.deps.config.encryptionKey, backup.id, { allowPlain: true }),
      createWriteStream(plainFile, { mode: 0o600 }),
    );
    const serviceRestores: number[] = [restoreMs];
    const plainRestores: number[] = [];
    for (let i = 0; i < 5; i++) {
      if (i > 0) {
        await settle();
        const t0 = performance.now();
        await call("POST", `/v1/databases/${target.id}/restore`, {
          source: { type: "backup", databaseId: target.id, backupId: backup.id },
        });
        await untilReady(target.id, 25);
        serviceRestores.push(performance.now() - t0);
      }
      // After ready the job drops the old copy, and DROP DATABASE waits for a checkpoint of all that was written:
      // let it finish before the baseline runs, as the baseline's own DROP finishes before the next restore.
      while (
        (
          (await sql(service.postgres.url, "SELECT 1 FROM pg_database WHERE datname LIKE $1", [
            `${pgName}\\_o%`,
          ])) as unknown[]
        ).length > 0
      )
        await new Promise((r) => setTimeout(r, 20));
      await settle();
      await sql(service.postgres.url, "CREATE DATABASE bench_j2");
      const t0 = performance.now();
      await run(
        path.join(service.postgres.bindir, "pg_restore"),
        ["--no-owner", "--no-acl", "--exit-on-error", "-j2", "-d", "bench_j2", plainFile],
        env,
      );
      plainRestores.push(performance.now() - t0);
      await sql(service.postgres.url, "DROP DATABASE bench_j2");
    }
    await rm(plainFile);
    logger.level = "silent";
    const median = (xs: number[]) => percentile(xs, 50);
    const step = (k: "prepareMs" | "pgRestoreMs" | "swapMs") => median(restoreSteps.map((r) => r[k]));
    rows.push([
      `the service's restore job by step, median of ${restoreSteps.length} (its own timing)`,
      `scratch database and checks ${ms(step("prepareMs"))}, decrypt + pg_restore (one job, from a pipe) ${ms(step("pgRestoreMs"))}, swap ${ms(step("swapMs"))}`,
      "",
    ]);
    rows.push([
      `restore of the ${mb.toFixed(0)} MB database, POST → ready, median of ${serviceRestores.length}`,
      ms(median(serviceRestores)),
      "",
    ]);
    rows.push([
      `plain \`pg_restore -j2\` of the same stored archive (decrypted beforehand) into a fresh database, median of ${plainRestores.length}`,
      ms(median(plainRestores)),
      "",
    ]);
    rows.push([
      "restore / plain pg_restore -j2 of the same archive",
      `${(median(serviceRestores) / median(plainRestores)).toFixed(2)}×`,
      "aim ≤ 1.1×",
    ]);
  }
} finally {
  await statusPool.end();
  await service.stop();
  await rm(dir, { recursive: true, force: true });
}

type Endpoint = { host: string; port: number; connectionString: string };
/** A login of a fresh database through both endpoints. Only host, port and sslmode of these are ever printed. */
async function freshLogin(projectId: string, name: string) {
  const db = (await call("POST", `/v1/projects/${projectId}/databases`, { name })).data;
  await untilReady(db.id);
  const minted = (await call("POST", `/v1/databases/${db.id}/connections`, { name: "bench" })) as unknown as {
    data: { endpoints: { direct: Endpoint; pooled: Endpoint } };
  };
  const { direct, pooled } = minted.data.endpoints;
  const u = new URL(direct.connectionString);
  const where = (e: Endpoint) =>
    `${e.host}:${e.port}, sslmode=${new URL(e.connectionString).searchParams.get("sslmode")}`;
  return {
    db,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: u.pathname.slice(1),
    direct,
    pooled,
    where,
  };
}

// The data plane: what a client pays to connect and run one query through PgBouncer against PostgreSQL itself (both
// TLS, verified against the stack's CA as pg does with `ssl: { ca }`), and 1,000 clients at once through the pooler.
async function poolerBench(projectId: string) {
  const login = await freshLogin(projectId, "pooled");
  const connect = (e: Endpoint) => {
    const c = new pg.Client({
      host: e.host,
      port: e.port,
      user: login.user,
      password: login.password,
      database: login.database,
      ssl: { ca: service.caCert },
    });
    c.on("error", () => {});
    return c;
  };
  const samples = { direct: [] as number[], pooled: [] as number[] };
  const n = quick ? 30 : 300;
  for (let i = 0; i < n; i++) {
    // Alternating which goes first, so load from elsewhere hits both alike.
    for (const side of i % 2 === 0 ? (["direct", "pooled"] as const) : (["pooled", "direct"] as const)) {
      const c = connect(login[side]);
      const t0 = performance.now();
      await c.connect();
      await c.query("SELECT 1");
      samples[side].push(performance.now() - t0);
      await c.end();
    }
  }
  const p = (side: "direct" | "pooled", q: number) => percentile(samples[side], q);
  rows.push([
    `connect (TLS, CA verified) + SELECT 1, direct to PostgreSQL (${login.where(login.direct)}), n=${n}`,
    `p50 ${ms(p("direct", 50))}, p99 ${ms(p("direct", 99))}`,
    "",
  ]);
  rows.push([
    `the same through PgBouncer ${service.pgbouncer!.version}, transaction mode (${login.where(login.pooled)}), n=${n}, interleaved`,
    `p50 ${ms(p("pooled", 50))}, p99 ${ms(p("pooled", 99))}`,
    "",
  ]);
  rows.push([
    "pooled / direct, connect + query",
    `p50 ${(p("pooled", 50) / p("direct", 50)).toFixed(2)}×, p99 ${(p("pooled", 99) / p("direct", 99)).toFixed(2)}×`,
    "",
  ]);

  // 1,000 clients (PgBouncer's max_client_conn) connected at once and held open; then each runs one query that
  // takes 20 ms while we sample the server sessions of that database.
  const clients = quick ? 200 : 1000;
  const t0 = performance.now();
  const held = await Promise.all(
    Array.from({ length: clients }, async () => {
      const c = connect(login.pooled);
      await c.connect();
      return c;
    }),
  );
  const connectAll = performance.now() - t0;
  const admin = new pg.Pool({ connectionString: `${service.postgres.url}?sslmode=disable`, max: 1 });
  // The login's server sessions, and those of mds_pooler: PgBouncer 1.18 runs its auth_query in the client's database.
  const sessionsSql =
    "SELECT count(*) FILTER (WHERE usename = $2)::int AS login, count(*) FILTER (WHERE usename <> $2)::int AS other FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'";
  const peak = { login: 0, other: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows: r } = await admin.query<{ login: number; other: number }>(sessionsSql, [
        login.database,
        login.user,
      ]);
      peak.login = Math.max(peak.login, r[0]!.login);
      peak.other = Math.max(peak.other, r[0]!.other);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  const latencies: number[] = [];
  const q0 = performance.now();
  await Promise.all(
    held.map(async (c) => {
      const t = performance.now();
      await c.query("SELECT pg_sleep(0.02)");
      latencies.push(performance.now() - t);
    }),
  );
  const queriesMs = performance.now() - q0;
  sampling = false;
  await sampler;
  const after = (await admin.query<{ login: number; other: number }>(sessionsSql, [login.database, login.user]))
    .rows[0]!;
  await Promise.all(held.map((c) => c.end()));
  await admin.end();
  const pool = service.pgbouncer!;
  rows.push([
    `${clients.toLocaleString("en")} clients connected through PgBouncer at once (TLS each), all held open`,
    `${clients} connected in ${ms(connectAll)}`,
    "",
  ]);
  rows.push([
    `then each runs SELECT pg_sleep(0.02) at once: time until all answered; per query p50 / p99`,
    `${ms(queriesMs)}; p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}`,
    `≥ ${((clients * 20) / pool.poolSize).toFixed(0)} ms (${clients} × 20 ms over ${pool.poolSize} server connections)`,
  ]);
  rows.push([
    `server sessions of the login in that database (pg_stat_activity) while they ran, peak sampled every 5 ms / after`,
    `${peak.login} / ${after.login}`,
    `≤ pool size ${pool.poolSize} (default_pool_size; max_db_connections ${pool.maxDbConnections})`,
  ]);
  rows.push([
    `other sessions in that database meanwhile (PgBouncer's auth_query login mds_pooler), peak / after`,
    `${peak.other} / ${after.other}`,
    "",
  ]);
}

// Creates with TLS on (this stack: PostgreSQL ssl=on, PgBouncer with TLS) against a second stack without TLS (no
// certificate, no PgBouncer, sslmode=disable), alternated create by create in one run. The embedded stack has no
// switch for TLS (its regions hand out sslmode=require and PgBouncer requires TLS), so the plain one is assembled
// here from the same parts: startPostgres without tls and startService with sslmode=disable regions.
async function tlsBench(projectId: string) {
  const plainDir = await mkdtemp(path.join(os.tmpdir(), "mds-bench-plain-"));
  const postgres = await startPostgres({ dir: path.join(plainDir, "postgres") });
  try {
    await sql(postgres.url, "CREATE DATABASE mds_control");
    const controlUrl = postgres.url.replace(/\/postgres$/, "/mds_control");
    const regions = Object.fromEntries(
      ["us-east-1", "us-west-1", "eu-west-3", "eu-central-1", "ap-northeast-1", "ap-southeast-1"].map((r) => [
        r,
        { adminUrl: postgres.url, sslmode: "disable" as const },
      ]),
    );
    const plain = await startService({
      controlUrl,
      regions,
      encryptionKey: randomBytes(32),
      backupDir: path.join(plainDir, "backups"),
      bindir: postgres.bindir,
      logger: pino({ level: "silent" }),
      rateLimit: { perSecond: 100_000, burst: 100_000 },
    });
    const plainStatus = new pg.Pool({ connectionString: controlUrl, max: 2 });
    try {
      const { token } = await createServiceToken(plainStatus, { workspace: "default", name: "bench" });
      const plainHeaders = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const plainProject = (
        (await (
          await fetch(`${plain.url}/v1/projects`, {
            method: "POST",
            headers: plainHeaders,
            body: JSON.stringify({ name: "bench", createDatabase: false }),
          })
        ).json()) as { data: { id: string } }
      ).data.id;
      const sides = {
        tls: {
          ready: [] as number[],
          create: async () => (await call("POST", `/v1/projects/${projectId}/databases`, {})).data.id,
          until: untilReady,
        },
        plain: {
          ready: [] as number[],
          create: async () =>
            (
              (await (
                await fetch(`${plain.url}/v1/projects/${plainProject}/databases`, {
                  method: "POST",
                  headers: plainHeaders,
                  body: "{}",
                })
              ).json()) as { data: { id: string } }
            ).data.id,
          until: async (id: string) => {
            for (;;) {
              const { rows: r } = await plainStatus.query<{ status: string }>(
                "SELECT status FROM databases WHERE id = $1",
                [id],
              );
              if (r[0]?.status === "ready") return;
              if (r[0]?.status === "failure") throw new Error(`database ${id} failed`);
              await new Promise((resolve) => setTimeout(resolve, 5));
            }
          },
        },
      };
      const n = quick ? 10 : 60;
      // Both stacks start settled: their spares made (the same number), a checkpoint done.
      await settle();
      await settle(postgres.url);
      for (let i = 0; i < n; i++) {
        for (const name of i % 2 === 0 ? (["tls", "plain"] as const) : (["plain", "tls"] as const)) {
          const side = sides[name];
          const t0 = performance.now();
          await side.until(await side.create());
          side.ready.push(performance.now() - t0);
        }
      }
      // Which of the TLS stack's own sessions to PostgreSQL use TLS: the create path's are all the service's.
      const sessions = (await sql(
        `${service.postgres.url}?sslmode=disable`,
        "SELECT count(*)::int AS n, count(*) FILTER (WHERE s.ssl)::int AS tls FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.backend_type = 'client backend' AND a.usename = 'postgres' AND a.pid <> pg_backend_pid()",
      )) as { n: number; tls: number }[];
      const q = (name: "tls" | "plain", x: number) => percentile(sides[name].ready, x);
      rows.push([
        `create, POST → ready, TLS on (PostgreSQL ssl=on + PgBouncer), n=${n}, alternated with the next row`,
        `p50 ${ms(q("tls", 50))}, p99 ${ms(q("tls", 99))}`,
        "",
      ]);
      rows.push([
        `create, POST → ready, a stack without TLS (no certificate, no PgBouncer, sslmode=disable), n=${n}`,
        `p50 ${ms(q("plain", 50))}, p99 ${ms(q("plain", 99))}`,
        "",
      ]);
      rows.push([
        "TLS on / off, create POST → ready",
        `p50 ${(q("tls", 50) / q("plain", 50)).toFixed(2)}×, p99 ${(q("tls", 99) / q("plain", 99)).toFixed(2)}×`,
        "",
      ]);
      rows.push([
        "the TLS stack's service sessions to PostgreSQL using TLS, after the creates",
        `${sessions[0]!.tls} of ${sessions[0]!.n}`,
        "the create path makes no handshake",
      ]);
    } finally {
      await plainStatus.end();
      await plain.stop();
    }
  } finally {
    await postgres.stop();
    await rm(plainDir, { recursive: true, force: true });
  }
}

const cpu = os.cpus()[0]?.model ?? "unknown CPU";
const [load1, load5] = os.loadavg();
const machine = `${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GB RAM, ${os.type()} ${os.release()}, Node ${process.version}, PostgreSQL ${service.postgres.version}`;
const table = ["| measure | result | aim |", "|---|---|---|", ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
console.log(table);
console.log(`\nmachine: ${machine}`);

if (write && !quick) {
  const date = new Date().toISOString().slice(0, 10);
  const file = path.resolve("bench", "history", `${date}-service.md`);
  const section = [
    `# Service (${date})`,
    "",
    `Command: \`npm run bench:service\` (bench/service.ts). Date: ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC.`,
    `Machine: ${machine}. Load average at the end: ${load1!.toFixed(1)} (1 min), ${load5!.toFixed(1)} (5 min).`,
    "",
    "One embedded PostgreSQL with durability on (fsync), the service in the same process as the benchmark (default job",
    'settings), HTTP over loopback. "POST → ready" polls the database\'s status in the control database every 5 ms (a',
    "restore: every 25 ms), so up to that much of it is polling. The list runs over 10,000 database rows in the control",
    "database (a list reads only the control database; 10,000 real PostgreSQL databases would need about 70 GB).",
    `Every measurement starts on a settled service: its spare databases made (${service.deps.config.spareDatabases} per server, the`,
    "default; provisioning renames one and runs CREATE DATABASE itself only when none is left) and a CHECKPOINT done.",
    "A burst larger than the spares (the concurrency-4 run: 120 creates) measures CREATE DATABASE throughput past them.",
    "With a load average above the core count, p99s mostly measure CPU scheduling delays: compare p50s.",
    "",
    table,
    "",
  ].join("\n");
  // One file per run: the history keeps every run; BENCHMARKS.md's table keeps only today's figures.
  const text = section;
  await writeFile(file, text);
  console.log(`recorded in ${file}`);
}
