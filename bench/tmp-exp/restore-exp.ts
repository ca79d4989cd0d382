import { spawn } from "node:child_process";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { startPostgres } from "../../src/postgres/index.ts";
import { openArchive, sealArchive } from "../../src/service/backup-archive.ts";
import { feed } from "../../src/service/dump.ts";

const dir = await mkdtemp(path.join(os.tmpdir(), "rexp-"));
const pgs = await startPostgres({ dir: path.join(dir, "pg") });
const u = new URL(pgs.url);
const env = { PGHOST: u.hostname, PGPORT: u.port, PGUSER: decodeURIComponent(u.username), PGPASSWORD: decodeURIComponent(u.password) };
const q = async (db: string, text: string) => { const c = new pg.Client({ ...{ host: u.hostname, port: Number(u.port), user: env.PGUSER, password: env.PGPASSWORD }, database: db }); await c.connect(); try { return (await c.query(text)).rows; } finally { await c.end(); } };
const bin = (p: string) => path.join(pgs.bindir, p);
function run(cmd: string, args: string[], extra: Record<string, string> = {}, stdin?: (w: NodeJS.WritableStream) => Promise<void>) {
  return new Promise<void>((resolve, reject) => {
    const c = spawn(cmd, args, { env: { ...env, ...extra }, stdio: [stdin ? "pipe" : "ignore", "inherit", "inherit"] });
    if (stdin) stdin(c.stdin!).catch(reject);
    c.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${code}`))));
  });
}
await q("postgres", "CREATE DATABASE src");
await q("src", "CREATE TABLE t (id bigint, v text, n numeric); INSERT INTO t SELECT g, md5(g::text) || md5((g*7)::text), g * 1.5 FROM generate_series(1, 900000) g; CREATE INDEX ON t (v);");
const file = path.join(dir, "a.dump");
await run(bin("pg_dump"), ["-Fc", "-Z1", "--no-owner", "--no-acl", "-d", "src", "-f", file]);
const key = randomBytes(32);
const sealed = path.join(dir, "a.sealed");
await pipeline(sealArchive(createReadStream(file) as AsyncIterable<Buffer>, key, "b1"), createWriteStream(sealed));
await q("postgres", "CREATE ROLE own NOLOGIN; CREATE ROLE job LOGIN PASSWORD 'pw' IN ROLE own");
let n = 0;
const variants: Record<string, (db: string) => Promise<void>> = {
  "j2 file": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-j2", "-d", db, file]),
  "j1 file": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-d", db, file]),
  "stdin plain (node stream)": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-d", db], {}, (w) => feed(createReadStream(file) as AsyncIterable<Buffer>, w as any)),
  "stdin decrypt": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-d", db], {}, (w) => feed(openArchive(createReadStream(sealed) as AsyncIterable<Buffer>, key, "b1", { allowPlain: false }), w as any)),
  "decrypt, owner login --role": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--role=own", "--exit-on-error", "-d", db], { PGUSER: "job", PGPASSWORD: "pw", PGOPTIONS: "-c synchronous_commit=off" }, (w) => feed(openArchive(createReadStream(sealed) as AsyncIterable<Buffer>, key, "b1", { allowPlain: false }), w as any)),
  "stdin decrypt async": (db) => run(bin("pg_restore"), ["--no-owner", "--no-acl", "--exit-on-error", "-d", db], { PGOPTIONS: "-c synchronous_commit=off" }, (w) => feed(openArchive(createReadStream(sealed) as AsyncIterable<Buffer>, key, "b1", { allowPlain: false }), w as any)),
};
const times: Record<string, number[]> = {};
for (let round = 0; round < 3; round++) {
  for (const [name, fn] of Object.entries(variants)) {
    const db = `d${n++}`;
    await q("postgres", `CREATE DATABASE ${db} OWNER own`);
    const t0 = performance.now();
    await fn(db);
    (times[name] ??= []).push(performance.now() - t0);
    await q("postgres", `DROP DATABASE ${db}`);
    await q("postgres", "CHECKPOINT");
  }
}
for (const [name, xs] of Object.entries(times)) console.log(name.padEnd(30), xs.map((x) => x.toFixed(0)).join(" "), "median", [...xs].sort((a, b) => a - b)[1]!.toFixed(0));
await pgs.stop();
