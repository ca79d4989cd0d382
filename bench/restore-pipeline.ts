// node bench/restore-pipeline.ts: the service's restore pipeline alone (no service, no job), against `pg_restore -j2`
// of the same archive from a plain file: is the sealed archive fed through a pipe slower than the baseline? Five
// alternated rounds on one fresh PostgreSQL, a CHECKPOINT before each restore. Prints a table.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { startPostgres } from "../src/postgres/index.ts";
import { openArchive, sealArchive } from "../src/service/jobs/backup-archive.ts";
import { feed } from "../src/service/jobs/dump.ts";

const rounds = 5;
const dir = await mkdtemp(path.join(os.tmpdir(), "mds-restore-pipeline-"));
const server = await startPostgres({ dir: path.join(dir, "pg") });
try {
  const url = new URL(server.url);
  const superuser = {
    PGHOST: url.hostname,
    PGPORT: url.port,
    PGUSER: decodeURIComponent(url.username),
    PGPASSWORD: decodeURIComponent(url.password),
  };
  const sql = async (database: string, text: string) => {
    const client = new pg.Client({
      host: url.hostname,
      port: Number(url.port),
      user: superuser.PGUSER,
      password: superuser.PGPASSWORD,
      database,
    });
    await client.connect();
    try {
      await client.query(text);
    } finally {
      await client.end();
    }
  };
  const run = (program: string, args: string[], env: Record<string, string>, stdin?: (w: Writable) => Promise<void>) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(path.join(server.bindir, program), args, {
        env: { ...superuser, ...env },
        stdio: [stdin ? "pipe" : "ignore", "inherit", "inherit"],
      });
      if (stdin) stdin(child.stdin!).catch(reject);
      child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${program} exit ${code}`))));
    });

  // The data of bench/service.ts's restore: one table of 900,000 rows and an index, dumped as the service dumps.
  await sql("postgres", "CREATE DATABASE source");
  await sql(
    "source",
    "CREATE TABLE big AS SELECT g AS id, md5(g::text) || md5((g * 7)::text) AS a, g % 1000 AS b, now() AS c FROM generate_series(1, 900000) g; CREATE INDEX big_b ON big (b)",
  );
  const plainFile = path.join(dir, "plain.dump");
  await run("pg_dump", ["-Fc", "-Z1", "--no-owner", "--no-acl", "-d", "source", "-f", plainFile], {});
  const key = randomBytes(32);
  const sealedFile = path.join(dir, "sealed.dump");
  await pipeline(
    sealArchive(createReadStream(plainFile) as AsyncIterable<Buffer>, key, "bkp"),
    createWriteStream(sealedFile),
  );
  // As the service restores: a login holding only the owner role, objects made as the owner.
  await sql("postgres", "CREATE ROLE owner NOLOGIN; CREATE ROLE job LOGIN PASSWORD 'job' IN ROLE owner");

  const sides = {
    "`pg_restore -j2` of the plain file, as the superuser (the baseline)": () =>
      run("pg_restore", ["--no-owner", "--no-acl", "--exit-on-error", "-j2", "-d", "target", plainFile], {}),
    "the sealed archive decrypted through a pipe into one `pg_restore`, as the job login (the service's way)": () =>
      run(
        "pg_restore",
        ["--no-owner", "--no-acl", "--role=owner", "--exit-on-error", "-d", "target"],
        { PGUSER: "job", PGPASSWORD: "job" },
        (stdin) =>
          feed(
            openArchive(createReadStream(sealedFile) as AsyncIterable<Buffer>, key, "bkp", { allowPlain: false }),
            stdin,
          ),
      ),
  };
  const times = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, restore] of round % 2 === 0 ? Object.entries(sides) : Object.entries(sides).reverse()) {
      await sql("postgres", "CREATE DATABASE target OWNER owner");
      await sql("postgres", "CHECKPOINT");
      const t0 = performance.now();
      await restore();
      times.set(name, [...(times.get(name) ?? []), performance.now() - t0]);
      await sql("postgres", "DROP DATABASE target");
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const [baseline, service] = Object.keys(sides).map((name) => times.get(name)!);
  console.log("| restore of the same 900,000-row table | median | each |\n|---|---|---|");
  for (const [name, xs] of times)
    console.log(`| ${name} | ${median(xs).toFixed(0)} ms | ${xs.map((x) => x.toFixed(0)).join(", ")} |`);
  console.log(`| the service's way / the baseline | ${(median(service!) / median(baseline!)).toFixed(2)}× | |`);
  console.log(
    `\nmachine: ${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, Node ${process.version}, load average ${os.loadavg()[0]!.toFixed(1)}`,
  );
} finally {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
}
