// npm run bench:restore: restores and clones of a database shaped like a real one (50 tables of uneven sizes, each
// with a primary key and two indexes) against PostgreSQL's own parallel tools, in one interleaved run:
//   - the service's restore (POST restore → ready) against `pg_restore -j2` of the same archive, decrypted beforehand
//     into a plain file (untimed: -j needs a seekable file), into a fresh database, as the superuser;
//   - the service's clone (POST databases with source database → ready) against `pg_dump -Fd -j2 -Z1` into a directory
//     then `pg_restore -j2` of it into a fresh database (CREATE DATABASE included), as the superuser.
// Rounds alternate which side goes first; a CHECKPOINT before every side. Prints a table of medians and ratios and
// exits 1 when a ratio is above 1.1×. `--rounds n` (default 3), `--rows n` (rows of the smallest table, default 5000),
// `--sides a,b` (only those sides), `--profile dir` (a CPU profile of each timed restore).
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Session } from "node:inspector/promises";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import pino from "pino";
import { serviceHeapFlags } from "../src/cli/heap-flags.ts";
import { openArchive } from "../src/service/jobs/backup-archive.ts";
import { sql, run } from "./processes.ts";

// V8's heap as `mds service` sets it, before the service's modules load (src/cli/heap-flags.ts).
serviceHeapFlags();
const { startEmbeddedService } = await import("../src/service/embedded/stack.ts");

const arg = (name: string) => process.argv.find((_, i) => process.argv[i - 1] === name);
const rounds = Number(arg("--rounds") ?? 3);
const smallestTable = Number(arg("--rows") ?? 5000);
const tables = 50;
// `--sides restore,"restore baseline"`: only these sides (profiling a restore need not pay for the clones).
const onlySides = arg("--sides")?.split(",");
// `--profile dir`: a CPU profile of this process (the service, in-process) over each timed restore side, into dir.
const profileDir = arg("--profile");
const aim = 1.1;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const seconds = (x: number) => `${(x / 1000).toFixed(2)} s`;

const dir = await mkdtemp(path.join(os.tmpdir(), "mds-bench-restore-"));
// The restore job's own timing of its steps (its debug record "restore swapped").
const restoreSteps: { pgRestoreMs: number; passes: Record<string, number> }[] = [];
const logger = pino(
  { level: "debug" },
  {
    write(line: string) {
      const record = JSON.parse(line) as { msg?: string; pgRestoreMs: number; passes?: Record<string, number> };
      if (record.msg === "restore swapped")
        restoreSteps.push({ pgRestoreMs: record.pgRestoreMs, passes: record.passes ?? {} });
    },
  },
);
// Durability on (fsync), default job settings: what a deployment runs.
const service = await startEmbeddedService({
  dir,
  port: 0,
  logger,
  service: { rateLimit: { perSecond: 100_000, burst: 100_000 }, spareDatabases: 4 },
});
const auth = { authorization: `Bearer ${service.token}`, "content-type": "application/json" };
async function call(method: string, p: string, body?: unknown) {
  const res = await fetch(`${service.url}${p}`, {
    method,
    headers: auth,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : {}) as { data: { id: string; status: string; connectionString?: string } };
}
const control = new pg.Pool({ connectionString: service.controlUrl, max: 2 });
const admin = service.postgres.url;
const untilReady = async (id: string) => {
  for (;;) {
    const { rows } = await control.query<{ status: string }>("SELECT status FROM databases WHERE id = $1", [id]);
    if (rows[0]?.status === "ready") return;
    if (rows[0]?.status === "failure") throw new Error(`database ${id} failed`);
    await new Promise((r) => setTimeout(r, 25));
  }
};
const pgNameOf = async (id: string) =>
  (await control.query<{ pg_name: string }>("SELECT pg_name FROM databases WHERE id = $1", [id])).rows[0]!.pg_name;
/** Until no database matching `like` is left on the server (the jobs drop old copies after they report ready). */
const untilGone = async (like: string) => {
  while ((await sql(admin, "SELECT 1 FROM pg_database WHERE datname LIKE $1", [like])).length > 0)
    await new Promise((r) => setTimeout(r, 25));
};
// The spare databases made again after a job took one, then a CHECKPOINT: no side pays for the one before.
const settle = async () => {
  while (
    (
      (await sql(admin, "SELECT count(*)::int AS n FROM pg_database WHERE datname LIKE 'mds\\_spare\\_%'")) as {
        n: number;
      }[]
    )[0]!.n < service.deps.config.spareDatabases
  )
    await new Promise((r) => setTimeout(r, 50));
  await sql(admin, "CHECKPOINT");
};

const superuser = new URL(admin);
const env = {
  PGHOST: superuser.hostname,
  PGPORT: superuser.port,
  PGUSER: decodeURIComponent(superuser.username),
  PGPASSWORD: decodeURIComponent(superuser.password),
};
const bin = (program: string) => path.join(service.postgres.bindir, program);

let failed = false;
try {
  const project = (await call("POST", "/v1/projects", { name: "bench", createDatabase: false })).data;
  const source = (await call("POST", `/v1/projects/${project.id}/databases`, { name: "source" })).data;
  await untilReady(source.id);
  const url = source.connectionString!;
  // Table i has smallestTable × (1 + i mod 7) rows: sizes differ sevenfold, as a real schema's do.
  for (let i = 0; i < tables; i++)
    await sql(
      url,
      `CREATE TABLE t${i} (id bigint PRIMARY KEY, a text NOT NULL, b int NOT NULL, c timestamptz NOT NULL);
       INSERT INTO t${i} SELECT g, md5(g::text) || md5((g * ${i + 7})::text), g % 1000, now() - g * interval '1 s'
         FROM generate_series(1, ${smallestTable * (1 + (i % 7))}) g;
       CREATE INDEX t${i}_b ON t${i} (b); CREATE INDEX t${i}_a ON t${i} (a);`,
    );
  const sourcePg = await pgNameOf(source.id);
  const size = Number(
    ((await sql(url, "SELECT pg_database_size(current_database())::bigint AS size")) as { size: string }[])[0]!.size,
  );
  const backup = (await call("POST", `/v1/databases/${source.id}/backups`)).data;
  for (;;) {
    const { rows } = await control.query<{ status: string; path: string; size: string }>(
      "SELECT status, path, size FROM backups WHERE id = $1",
      [backup.id],
    );
    if (rows[0]!.status === "completed") break;
    if (rows[0]!.status === "failed") throw new Error("backup failed");
    await new Promise((r) => setTimeout(r, 50));
  }
  const stored = (await control.query<{ path: string; size: string }>("SELECT path, size FROM backups WHERE id = $1", [
    backup.id,
  ]))!.rows[0]!;
  const plainFile = path.join(dir, "plain.dump");
  await pipeline(
    openArchive(createReadStream(stored.path), service.deps.config.encryptionKey, backup.id, { allowPlain: true }),
    createWriteStream(plainFile, { mode: 0o600 }),
  );
  console.error(
    `source: ${tables} tables, ${(size / 2 ** 20).toFixed(0)} MB; archive ${(Number(stored.size) / 2 ** 20).toFixed(0)} MB`,
  );

  // The restores go into a second database of the project, so the clones read a source nobody swaps meanwhile.
  const target = (await call("POST", `/v1/projects/${project.id}/databases`, { name: "target" })).data;
  await untilReady(target.id);
  const targetPg = await pgNameOf(target.id);

  // CPU time of the timed part of each side: this process's (the service, in-process, and the bench) and its reaped
  // children's (pg_restore, pg_dump: the kernel's cutime + cstime), so a side that costs more CPU than the other shows
  // it even when the clock hides it. Read when the clock stops, not after the side's cleanup (dropping old copies).
  const childrenCpuMs = async () => {
    const stat = await readFile("/proc/self/stat", "utf8").catch(() => "");
    if (!stat) return 0; // not Linux
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[13]) + Number(fields[14])) * 10; // cutime, cstime, in USER_HZ (100) ticks
  };
  // The PostgreSQL server's CPU: the postmaster's own and its reaped children's (backends that ended), plus its live
  // children's (backends still open, checkpointer, walwriter…). The sum only grows, so a side's share is a difference.
  const postmaster = Number(
    (await readFile(path.join(dir, "postgres", "data", "postmaster.pid"), "utf8").catch(() => "0")).split("\n")[0],
  );
  const ticks = (stat: string, from: number) => {
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(fields[1]), ms: fields.slice(11, 11 + from).reduce((s, f) => s + Number(f), 0) * 10 };
  };
  const serverCpuMs = async () => {
    if (!postmaster) return 0;
    let ms = ticks(await readFile(`/proc/${postmaster}/stat`, "utf8"), 4).ms; // utime, stime, cutime, cstime
    for (const pid of await readdir("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
      const child = stat && ticks(stat, 2);
      if (child && child.ppid === postmaster) ms += child.ms;
    }
    return ms;
  };
  let cpuAtStart = { node: process.cpuUsage(), children: 0, server: 0 };
  let cpuOfSide = { node: 0, children: 0, server: 0 };
  let profiling: Session | undefined;
  const startClock = async (profile = false) => {
    if (profile && profileDir) {
      profiling = new Session();
      profiling.connect();
      await profiling.post("Profiler.enable");
      await profiling.post("Profiler.setSamplingInterval", { interval: 500 });
      await profiling.post("Profiler.start");
    }
    cpuAtStart = { node: process.cpuUsage(), children: await childrenCpuMs(), server: await serverCpuMs() };
    return performance.now();
  };
  const stopClock = async (t0: number) => {
    const took = performance.now() - t0;
    const node = process.cpuUsage(cpuAtStart.node);
    cpuOfSide = {
      node: (node.user + node.system) / 1000,
      children: (await childrenCpuMs()) - cpuAtStart.children,
      server: (await serverCpuMs()) - cpuAtStart.server,
    };
    if (profiling) {
      const { profile } = await profiling.post("Profiler.stop");
      profiling.disconnect();
      profiling = undefined;
      await mkdir(profileDir!, { recursive: true });
      await writeFile(path.join(profileDir!, `restore-${Date.now()}.cpuprofile`), JSON.stringify(profile));
    }
    return took;
  };
  const sides: Record<string, () => Promise<number>> = {
    restore: async () => {
      const t0 = await startClock(true);
      await call("POST", `/v1/databases/${target.id}/restore`, {
        source: { type: "backup", databaseId: source.id, backupId: backup.id },
      });
      await untilReady(target.id);
      const took = await stopClock(t0);
      await untilGone(`${targetPg}\\_o%`);
      return took;
    },
    "restore baseline": async () => {
      await sql(admin, "CREATE DATABASE bench_j2");
      const t0 = await startClock();
      await run(
        bin("pg_restore"),
        ["--no-owner", "--no-acl", "--exit-on-error", "-j2", "-d", "bench_j2", plainFile],
        env,
      );
      const took = await stopClock(t0);
      await sql(admin, "DROP DATABASE bench_j2");
      return took;
    },
    clone: async () => {
      const t0 = await startClock();
      const clone = (
        await call("POST", "/v1/databases", {
          projectId: project.id,
          name: "clone",
          region: "inherit",
          source: { type: "database", databaseId: source.id },
        })
      ).data;
      await untilReady(clone.id);
      const took = await stopClock(t0);
      const clonePg = await pgNameOf(clone.id);
      await call("DELETE", `/v1/databases/${clone.id}`);
      await untilGone(clonePg);
      return took;
    },
    "clone baseline": async () => {
      const out = path.join(dir, "clone-dir");
      const t0 = await startClock();
      await run(bin("pg_dump"), ["-Fd", "-j2", "-Z1", "--no-owner", "--no-acl", "-f", out, "-d", sourcePg], env);
      await sql(admin, "CREATE DATABASE bench_clone");
      await run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-j2", "-d", "bench_clone", out], env);
      const took = await stopClock(t0);
      await sql(admin, "DROP DATABASE bench_clone");
      await rm(out, { recursive: true, force: true });
      return took;
    },
  };
  for (const name of Object.keys(sides)) if (onlySides && !onlySides.includes(name)) delete sides[name];
  const times = new Map<string, number[]>(Object.keys(sides).map((k) => [k, []]));
  const cpu = new Map<string, { node: number[]; children: number[]; server: number[] }>(
    Object.keys(sides).map((k) => [k, { node: [], children: [], server: [] }]),
  );
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? Object.keys(sides) : Object.keys(sides).reverse();
    for (const name of order) {
      await settle();
      const took = await sides[name]!();
      cpu.get(name)!.node.push(cpuOfSide.node);
      cpu.get(name)!.children.push(cpuOfSide.children);
      cpu.get(name)!.server.push(cpuOfSide.server);
      times.get(name)!.push(took);
      console.error(`round ${round + 1}: ${name} ${seconds(took)} (load ${os.loadavg()[0]!.toFixed(1)})`);
    }
  }
  await rm(plainFile);

  const m = (name: string) => median(times.get(name) ?? []);
  const restoreRatio = m("restore") / m("restore baseline");
  const cloneRatio = m("clone") / m("clone baseline");
  const each = (name: string) => (times.get(name) ?? []).map(seconds).join(", ");
  const rows = [
    [`restore, POST → ready (the service)`, seconds(m("restore")), each("restore")],
    [
      `… its pg_restore step (the job's own timing)`,
      seconds(median(restoreSteps.map((s) => s.pgRestoreMs))),
      restoreSteps.map((s) => seconds(s.pgRestoreMs)).join(", "),
    ],
    [
      `… by phase (median; pre-data includes the lists)`,
      Object.keys(restoreSteps[0]?.passes ?? {})
        .map((k) => {
          const m = median(restoreSteps.map((s) => s.passes[k] ?? 0));
          return k.endsWith("Bytes") ? `${k} ${(m / 2 ** 20).toFixed(1)} MB` : `${k.replace(/Ms$/, "")} ${seconds(m)}`;
        })
        .join(", ") || "one pass",
      "",
    ],
    [`\`pg_restore -j2\` of the same archive`, seconds(m("restore baseline")), each("restore baseline")],
    [`restore / \`pg_restore -j2\``, `${restoreRatio.toFixed(2)}×`, `aim ≤ ${aim}×`],
    ...["restore", "restore baseline"].map((name) => [
      `… CPU of ${name} (median): Node (the service and bench), children (pg_restore), PostgreSQL server`,
      `${seconds(median(cpu.get(name)?.node ?? []))}, ${seconds(median(cpu.get(name)?.children ?? []))}, ${seconds(median(cpu.get(name)?.server ?? []))}`,
      "",
    ]),
    [`clone, POST → ready (the service)`, seconds(m("clone")), each("clone")],
    [`\`pg_dump -Fd -j2 -Z1\` + \`pg_restore -j2\``, seconds(m("clone baseline")), each("clone baseline")],
    [`clone / (\`pg_dump -Fd -j2\` + \`pg_restore -j2\`)`, `${cloneRatio.toFixed(2)}×`, `aim ≤ ${aim}×`],
  ];
  console.log(
    [
      // Rows of sides left out by --sides say NaN; their ratio does not fail the run.
      `| ${tables} tables, ${(size / 2 ** 20).toFixed(0)} MB, archive ${(Number(stored.size) / 2 ** 20).toFixed(0)} MB, ${rounds} interleaved rounds | median | each |`,
      "|---|---|---|",
      ...rows.map((r) => `| ${r.join(" | ")} |`),
    ].join("\n"),
  );
  const [load1, load5] = os.loadavg();
  console.log(
    `\nmachine: ${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, Node ${process.version}, PostgreSQL ${service.postgres.version}, load average ${load1!.toFixed(1)} (1 min), ${load5!.toFixed(1)} (5 min)`,
  );
  failed = restoreRatio > aim || cloneRatio > aim; // NaN (a side left out) is not above
} finally {
  await control.end();
  await service.stop();
  await rm(dir, { recursive: true, force: true });
}
if (failed) {
  console.error(`a ratio is above ${aim}×`);
  process.exitCode = 1;
}
