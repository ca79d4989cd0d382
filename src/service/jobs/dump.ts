import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { chmod, mkdir, mkdtemp, open, rename, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable, Writable } from "node:stream";
import { ArchiveError, archiveMagic, openArchive, sealArchive } from "./backup-archive.ts";
import { pinnedSessionOptions } from "../../postgres/session-options.ts";
import type { DatabaseLogin } from "./job-login.ts";
import { onlyBlocksOf, readToc, type Toc } from "./archive-toc.ts";
import { ListingReader, listFile, planData, planLanes, planPostData, type ListEntry } from "./restore-plan.ts";

// pg_dump and pg_restore as child processes, logged in as a job login (job-login.ts), never as the superuser. The
// password goes through PGPASSWORD, never argv, so it cannot show in `ps` or in an error that quotes the command.
// Archives never touch the disk in plain text: pg_dump's output is sealed on its way to the file (backup-archive.ts),
// and a restore feeds pg_restore authenticated plaintext through a pipe.

function connectionEnv(login: DatabaseLogin, database: string): Record<string, string> {
  return {
    PGHOST: login.host,
    PGPORT: login.port,
    PGUSER: login.user,
    PGPASSWORD: login.password,
    PGDATABASE: database,
    PGSSLMODE: login.sslmode,
    PGCONNECT_TIMEOUT: "10",
    // Ends a session whose client was killed (a job past its time limit) even while it waits on a lock. (lock_timeout
    // cannot be bounded here: archives begin with SET lock_timeout = 0; pg_dump has --lock-wait-timeout.) The rest
    // pins what the tenant's `ALTER DATABASE … SET` must not change for the job (read-only, timeouts, role…).
    PGOPTIONS: `-c client_connection_check_interval=1000 ${pinnedSessionOptions(0)}`,
  };
}

type Child = { child: ChildProcess; done: Promise<void> };

function start(program: string, args: string[], env: Record<string, string>, signal?: AbortSignal): Child {
  const child = spawn(program, args, {
    env,
    stdio: ["pipe", "pipe", "pipe"],
    ...(signal ? { signal, killSignal: "SIGKILL" as const } : {}),
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const done = new Promise<void>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, sig) => {
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(program)} failed (${sig ?? `exit ${code}`}): ${stderr.trim()}`));
    });
  });
  done.catch(() => {});
  return { child, done };
}

/** What feed() lets wait in a child's stdin queue before it waits for the child to read. */
const queued = 1024 * 1024;

/**
 * Writes `chunks` into a child's stdin with backpressure. If the child stops reading (pg_restore --list needs only
 * the table of contents), the rest is still consumed, so an archive is always authenticated to its end, unless
 * `enough()` says the child exited content and no more is wanted (a pass of a parallel restore).
 */
export async function feed(chunks: AsyncIterable<Buffer>, stdin: Writable, enough = () => false): Promise<void> {
  let open = true;
  stdin.on("error", () => (open = false));
  for await (const chunk of chunks) {
    if (enough()) break;
    // A child that exited has its stdin destroyed by Node without an 'error': a write then returns false and
    // neither 'drain' nor 'close' (already past) ever comes. Waiting for them hung backups forever once
    // pg_restore --list had read the table of contents and exited while we were still writing.
    if (stdin.destroyed) open = false;
    // Up to `queued` bytes wait in Node's queue, which libuv writes into the pipe as the child reads, without this
    // loop (the service's JavaScript) having to run in between: at 16 KiB (the stream's default) each of a
    // restore's runs waited on the event loop every 64 KiB.
    if (open && !stdin.write(chunk) && stdin.writableLength >= queued && !stdin.destroyed) await drainedOrClosed(stdin);
  }
  stdin.end();
}

/** Removes the listener that did not fire: one per wait would pile up on a long restore's stdin. */
function drainedOrClosed(stream: Writable): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("close", done);
  });
}

async function* counted(source: AsyncIterable<Buffer>, fed?: (bytes: number) => void): AsyncGenerator<Buffer> {
  let bytes = 0;
  try {
    for await (const chunk of source) {
      bytes += chunk.length;
      yield chunk;
    }
  } finally {
    fed?.(bytes);
  }
}

async function* hashing(source: AsyncIterable<Buffer>, hash: ReturnType<typeof createHash>): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    hash.update(chunk);
    yield chunk;
  }
}

/** Backups are the tenant's data: only the service's user may list or read them. */
export async function privateDirectory(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}

export type ArchiveKey = { key: Buffer; context: string };

/**
 * A dump's file size and checksum, and (for an archive version archive-toc.ts reads) the bytes of each data entry
 * by dump id: what a restore balances its runs by (restore-plan.ts), kept in backups.data_bytes.
 */
export type DumpResult = { size: number; sha256: string; dataBytes?: Record<string, number> };

/**
 * Dumps `database` as `login` into `file`, sealed under `archive` (custom format inside), atomically: the file
 * appears complete or not at all, mode 0600. pg_dump waits at most `lockTimeoutMs` for a table lock.
 */
export async function dumpDatabase(input: {
  bindir: string;
  login: DatabaseLogin;
  database: string;
  file: string;
  archive: ArchiveKey;
  lockTimeoutMs: number;
  /** More pg_dump options: a clone's `--snapshot` and `--exclude-table-data` (clone.ts). */
  options?: string[];
  /** Objects the archive may list (archiveEntryLimit): past it the dump fails, as its restore could not run. */
  maxEntries: number;
  signal?: AbortSignal;
}): Promise<DumpResult> {
  const tmp = `${input.file}.partial`;
  await rm(tmp, { force: true });
  try {
    const hash = createHash("sha256");
    const handle = await open(tmp, "wx", 0o600);
    try {
      // -Z1: dumps are compressed cheaply; the restore side pays the inflating.
      const dump = start(
        path.join(input.bindir, "pg_dump"),
        [
          "-Fc",
          "-Z1",
          "--no-owner",
          "--no-acl",
          `--lock-wait-timeout=${input.lockTimeoutMs}`,
          ...(input.options ?? []),
        ],
        connectionEnv(input.login, input.database),
        input.signal,
      );
      dump.child.stdin!.end();
      const write = (async () => {
        for await (const chunk of hashing(
          sealArchive(dump.child.stdout as Readable, input.archive.key, input.archive.context),
          hash,
        ))
          await handle.write(chunk);
      })();
      // A failed write must not leave pg_dump blocked on a pipe nobody reads.
      write.catch(() => dump.child.kill("SIGKILL"));
      await Promise.all([dump.done, write]);
      await handle.sync();
    } finally {
      await handle.close();
    }
    // A backup nobody can read is worse than none: it must open to its end and pg_restore must list its contents.
    // Meanwhile each table's data size is read, so a restore can plan its runs without reading the archive first.
    const [, toc] = await Promise.all([
      listArchive({
        bindir: input.bindir,
        file: tmp,
        archive: input.archive,
        maxEntries: input.maxEntries,
        ...(input.signal ? { signal: input.signal } : {}),
      }),
      tableOfContents({ file: tmp, archive: input.archive, maxEntries: input.maxEntries }, true),
    ]);
    await rename(tmp, input.file);
    return {
      size: (await stat(input.file)).size,
      sha256: hash.digest("hex"),
      ...(toc ? { dataBytes: Object.fromEntries(toc.dataBytes) } : {}),
    };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** A sealed archive (backup-archive.ts), or else a plain pg_dump archive taken before backups were encrypted. */
async function isSealed(file: string): Promise<boolean> {
  const handle = await open(file, "r");
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(archiveMagic.length), 0, archiveMagic.length, 0);
    return bytesRead === archiveMagic.length && buffer.equals(archiveMagic);
  } finally {
    await handle.close();
  }
}

/**
 * Before anything is touched: a plain archive must match the checksum the control database recorded. Returns whether
 * the archive is sealed, and that verdict holds for the restore (restoreDatabase's `plainSha256`): a file swapped for
 * another kind later is refused, never re-judged. A sealed archive is not read ahead (that was ~10 % of a restore,
 * bench/history/2026-11-24-service-data-plane-tls-create-tail.md): each record authenticates before pg_restore sees a byte of it, and the authenticated final flag and
 * the backup id in the key refuse a truncated or swapped file. A restore that fails on the way never replaces
 * anything: it fills a scratch database (a restore) or a database that is not ready yet and is dropped (create from a
 * backup).
 */
export async function verifyArchive(file: string, sha256: string): Promise<{ sealed: boolean }> {
  if (await isSealed(file)) return { sealed: true };
  const actual = await sha256File(file);
  if (actual !== sha256) throw new Error("backup archive is corrupt (checksum mismatch)");
  return { sealed: false };
}

/**
 * Streams the authenticated plaintext of `file` into a pg_restore run; both must succeed. With `plainSha256` the
 * archive may be plain (pre-encryption) and is authenticated by that checksum over the very bytes fed; without it,
 * it must be sealed.
 */
async function pipeToRestore(input: {
  bindir: string;
  file: string;
  archive: ArchiveKey;
  plainSha256?: string;
  args: string[];
  env: Record<string, string>;
  signal?: AbortSignal;
  /**
   * Stop reading a sealed archive once pg_restore exited content (a pass that needs only the table of contents, or
   * data up to its last entry): every byte it read was authenticated, and it needed no more.
   */
  untilDone?: boolean;
  /**
   * The dump ids the run restores (its `-L` list; none for a section without data): a sealed archive is fed without
   * the other runs' table data and ends after the last block of these (archive-toc.ts onlyBlocksOf).
   */
  keep?: ReadonlySet<number>;
  /** Told how many bytes pg_restore was fed, once it is done. */
  fed?: (bytes: number) => void;
  /** For a `--list`: reads its output as it streams (a tenant decides its size); otherwise the output is dropped. */
  listing?: ListingReader;
}): Promise<ListEntry[]> {
  const hash = input.plainSha256 ? createHash("sha256") : undefined;
  const restore = start(path.join(input.bindir, "pg_restore"), input.args, input.env, input.signal);
  // Nothing may throw out of a stream's callback: what the listing refuses kills pg_restore and fails this run.
  let refused: unknown;
  restore.child.stdout!.on("data", (d: Buffer) => {
    if (refused !== undefined || !input.listing) return;
    try {
      input.listing.push(d);
    } catch (err) {
      refused = err;
      restore.child.kill("SIGKILL");
    }
  });
  // 1 MiB reads: a restore's runs read the whole file at once, each, in 16 times fewer reads than by default.
  const file = createReadStream(input.file, { highWaterMark: 1024 * 1024 });
  const bytes = file as AsyncIterable<Buffer>;
  const authenticated = openArchive(hash ? hashing(bytes, hash) : bytes, input.archive.key, input.archive.context, {
    allowPlain: hash !== undefined,
  });
  // A plain archive (no hash without every byte) is fed whole.
  const plaintext = counted(input.keep && !hash ? onlyBlocksOf(authenticated, input.keep) : authenticated, input.fed);
  let exited = false;
  if (input.untilDone && !hash)
    void restore.done.then(
      () => (exited = true),
      () => {},
    );
  const feeding = feed(plaintext, restore.child.stdin!, () => exited).catch((err: unknown) => {
    // Never let pg_restore see the end of input after a failed check: it must not finish a partial restore.
    restore.child.kill("SIGKILL");
    throw err;
  });
  try {
    await Promise.all([feeding, restore.done]);
  } catch (err) {
    throw refused ?? err;
  } finally {
    file.destroy(); // a run that needed only part of the archive leaves the rest unread
  }
  if (refused !== undefined) throw refused;
  if (hash && hash.digest("hex") !== input.plainSha256)
    throw new ArchiveError("it changed while it was restored (checksum mismatch)");
  return input.listing?.end() ?? [];
}

async function listArchive(input: {
  bindir: string;
  file: string;
  archive: ArchiveKey;
  maxEntries: number;
  signal?: AbortSignal;
}): Promise<void> {
  const { maxEntries, ...read } = input;
  await pipeToRestore({ ...read, args: ["--list"], env: {}, listing: new ListingReader(maxEntries, { count: true }) });
}

/** Logs in for one pass of a restore (job-login.ts: one login, one session); `pass` "" for a restore in one run. */
export type LoginFor = <T>(pass: string, fn: (login: DatabaseLogin) => Promise<T>) => Promise<T>;

/**
 * Restores the archive `file` into the existing, empty `database`; objects are created as `role` (the owner). Data
 * reaches pg_restore only after its record authenticated; a truncated or altered archive fails the restore (pg_restore
 * is killed before it sees the end of input). Its lock waits are bounded only by the job's time limit: in the scratch
 * database only the tenant can hold locks.
 *
 * From a pipe pg_restore runs one job. An archive of `split.minBytes` or more is restored as `pg_restore -j` would,
 * by `split.jobs` runs at once (restore-plan.ts), each reading the archive through its own authenticated pipe and
 * logged in by a login of its own; if one run fails the others are killed and the restore fails.
 */
export async function restoreDatabase(input: {
  bindir: string;
  loginFor: LoginFor;
  database: string;
  file: string;
  /** Only for a plain archive, as verifyArchive judged it: a sealed one is authenticated by its records. */
  plainSha256?: string;
  archive: ArchiveKey;
  role: string;
  split: { jobs: number; minBytes: number };
  /** Each data entry's bytes by dump id, recorded at dump time: the plan then reads only the table of contents. */
  dataBytes?: Record<string, number>;
  /** Data that is not in the archive (a clone's large tables, piped from the source), loaded after the archive's. */
  moreData?: (signal: AbortSignal, track: Track) => Promise<void>;
  /** Objects the archive may list (archiveEntryLimit): past it the restore fails before the plan is made. */
  maxEntries: number;
  signal?: AbortSignal;
}): Promise<Record<string, number>> {
  const read = {
    bindir: input.bindir,
    file: input.file,
    archive: input.archive,
    maxEntries: input.maxEntries,
    ...(input.plainSha256 ? { plainSha256: input.plainSha256 } : {}),
  };
  /** A pg_restore run: its arguments, and for a run of a split restore the dump ids it restores (pipeToRestore). */
  type Run = { args: string[]; keep?: ReadonlySet<number>; fed?: (bytes: number) => void };
  const { maxEntries, ...archive } = read;
  const run = (login: DatabaseLogin, { args, keep, fed }: Run, signal: AbortSignal | undefined, untilDone: boolean) =>
    pipeToRestore({
      ...archive,
      args: ["--no-owner", "--no-acl", `--role=${input.role}`, "--exit-on-error", ...args, "-d", input.database],
      // Commits stay synchronous: with them asynchronous, a server crash and restart between pg_restore's exit and
      // the next statement would lose its last commits unseen, and the swap (or "ready") would follow on what is left.
      env: connectionEnv(login, input.database),
      ...(signal ? { signal } : {}),
      untilDone,
      ...(keep ? { keep } : {}),
      ...(fed ? { fed } : {}),
    });
  const { jobs, minBytes } = input.split;
  if (!input.moreData && (jobs < 2 || (await stat(input.file)).size < minBytes)) {
    await input.loginFor("", (login) => run(login, { args: [] }, input.signal, false));
    return {};
  }
  /**
   * One pass as a login of its own; resolves once its pg_restore is done. Dropping the login is tracked, not waited
   * for: the next pass need not wait on it, the restore does (allOrNothing waits for every tracked task). `args` may
   * come later: the login is made at once and the run starts when they come (none: nothing to run), so the logins
   * of the next runs are ready when the plan is.
   */
  const pass = (name: string, args: Run | Promise<Run | undefined>, signal: AbortSignal, track: Track) => {
    // A plan that fails (an archive past archiveEntryLimit) rejects `args` while the login is still being made: the
    // failure is the restore's (its own task reports it), and must not be an unhandled rejection meanwhile.
    if (args instanceof Promise) args.catch(() => {});
    return new Promise<void>((resolve, reject) => {
      track(() =>
        input.loginFor(name, async (login) => {
          const ready = await Promise.race([args, aborted(signal)]);
          if (!ready) return resolve();
          await run(login, ready, signal, true).then(
            () => resolve(),
            (err: unknown) => {
              reject(err as Error);
              throw err;
            },
          );
        }),
      ).catch(reject);
    });
  };
  // A section without data, or a list (the table of contents alone), needs no data block.
  const none: ReadonlySet<number> = new Set();
  const list = (section: string, signal: AbortSignal) =>
    pipeToRestore({
      ...archive,
      args: ["--list", `--section=${section}`],
      env: {},
      signal,
      untilDone: true,
      keep: none,
      listing: new ListingReader(maxEntries),
    });
  // The `-L` lists hold dump ids only (no name, no data): files, as pg_restore cannot open a socket Node passes it.
  const lists = await mkdtemp(path.join(os.tmpdir(), "mds-restore-"));
  const timings: Record<string, number> = {};
  let t = performance.now();
  const phase = (name: string) => {
    timings[name] = Math.round(performance.now() - t);
    t = performance.now();
  };
  try {
    await allOrNothing(input.signal, async (signal, track) => {
      const fileOf = async (name: string, ids: number[] | undefined): Promise<Run | undefined> => {
        if (!ids?.length) return undefined;
        const file = path.join(lists, `${name}.list`);
        await writeFile(file, listFile(ids), { mode: 0o600 });
        return { args: ["-L", file], keep: new Set(ids) };
      };
      const listed = (name: string, ids: number[]) => pass(name, fileOf(name, ids), signal, track);
      // Each table's indexes follow its data in the same run (what pg_restore -j does from a file); their logins
      // are made while pre-data is restored.
      const plan = Promise.withResolvers<number[][]>();
      plan.promise.catch(() => {});
      // Each part's own end (from the restore's start) shows which one pre-data waits for, and how even the lanes are.
      const start = performance.now();
      const ended = <T>(name: string, p: Promise<T>) =>
        p.then((v) => ((timings[name] = Math.round(performance.now() - start)), v));
      const lanes = input.moreData
        ? []
        : Array.from({ length: jobs }, (_, i) =>
            ended(
              `lane${i}EndMs`,
              pass(
                `d${i}`,
                // What each lane's pg_restore was fed (its share of the data, not the whole archive).
                plan.promise.then(async (l) => {
                  const lane = await fileOf(`d${i}`, l[i]);
                  return lane && { ...lane, fed: (bytes: number) => (timings[`lane${i}Bytes`] = bytes) };
                }),
                signal,
                track,
              ),
            ),
          );
      // Their failure is the restore's (track); awaited only once pre-data succeeded, so never left unhandled.
      for (const lane of lanes) lane.catch(() => {});
      // The lists and the table of contents need no login: they are read while pre-data is restored.
      const [, data, post, toc] = await Promise.all([
        ended("preRunMs", pass("pre", { args: ["--section=pre-data"], keep: none }, signal, track)),
        track(() => list("data", signal)),
        track(() => list("post-data", signal)),
        input.moreData
          ? undefined
          : ended(
              "tocMs",
              track(() => planningToc(read, input.dataBytes)),
            ),
      ]).catch((err: unknown) => {
        plan.reject(err);
        throw err;
      });
      phase("preDataMs");
      if (!input.moreData) {
        const planned = toc ? planLanes(data, post, toc, jobs) : undefined;
        plan.resolve(planned?.lanes ?? planData(data, jobs));
        await Promise.all(lanes);
        phase(planned ? "lanesMs" : "dataMs");
        if (planned) {
          if (planned.after.length) await listed("post", planned.after);
          phase("postDataMs");
          return;
        }
      } else {
        await Promise.all(planData(data, jobs).map((ids, i) => listed(`d${i}`, ids)));
        phase("dataMs");
      }
      if (input.moreData) {
        await input.moreData(signal, track);
        phase("pipedDataMs");
      }
      const { parallel, after } = planPostData(post, jobs);
      await Promise.all(parallel.map((ids, i) => listed(`i${i}`, ids)));
      phase("indexesMs");
      if (after.length) await listed("post", after);
      phase("postDataMs");
    });
  } finally {
    await rm(lists, { recursive: true, force: true });
  }
  return timings;
}

/**
 * The archive's table of contents and, with `dataSizes`, each table's data size (archive-toc.ts, a read of the whole
 * archive), through the same authenticated stream.
 */
async function tableOfContents(
  read: { file: string; archive: ArchiveKey; maxEntries: number },
  dataSizes: boolean,
): Promise<Toc | undefined> {
  const bytes = createReadStream(read.file);
  try {
    return await readToc(
      openArchive(bytes as AsyncIterable<Buffer>, read.archive.key, read.archive.context, { allowPlain: true }),
      { dataSizes, maxEntries: read.maxEntries },
    );
  } finally {
    bytes.destroy();
  }
}

/** What the plan needs: the sizes recorded at dump time when there are any, else read from the archive. */
async function planningToc(
  read: { file: string; archive: ArchiveKey; maxEntries: number },
  dataBytes: Record<string, number> | undefined,
): Promise<Toc | undefined> {
  if (!dataBytes) return tableOfContents(read, true);
  const toc = await tableOfContents(read, false);
  return (
    toc && { entries: toc.entries, dataBytes: new Map(Object.entries(dataBytes).map(([id, n]) => [Number(id), n])) }
  );
}

/** Rejects once `signal` aborts: a run waiting for its plan does not outlive a failed restore. */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(signal.reason as Error);
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}

/** Starts a task of an allOrNothing: its failure kills the other tasks' programs. */
type Track = <T>(task: () => Promise<T>) => Promise<T>;

/**
 * Runs `fn`, whose programs all get `signal`: the first task (started with `track`) that fails aborts the signal, so
 * the other programs are killed, and once every task has settled, its error is thrown (not the others' aborts).
 */
async function allOrNothing(
  outer: AbortSignal | undefined,
  fn: (signal: AbortSignal, track: Track) => Promise<void>,
): Promise<void> {
  const stop = new AbortController();
  const signal = outer ? AbortSignal.any([outer, stop.signal]) : stop.signal;
  let first: unknown;
  const running = new Set<Promise<unknown>>();
  const track = <T>(task: () => Promise<T>): Promise<T> => {
    const p = task().catch((err: unknown) => {
      if (first === undefined) first = err;
      stop.abort();
      throw err;
    });
    const settled = p.catch(() => {});
    running.add(settled);
    void settled.then(() => running.delete(settled));
    return p;
  };
  try {
    await fn(signal, track);
  } catch (err) {
    if (first === undefined) first = err;
    stop.abort();
  }
  while (running.size) await Promise.all(running);
  if (first !== undefined) throw first;
}

/**
 * `pg_dump --data-only` of the tables matching `patterns` (pg_dump's `-t` patterns) as `source` under the exported
 * `snapshot`, piped straight into a `pg_restore` of that data as `target`: a clone's data never touches the disk.
 * Both run as job logins (never the superuser); if either fails, both are killed.
 */
export async function pipeTables(input: {
  bindir: string;
  source: { login: DatabaseLogin; database: string };
  target: { login: DatabaseLogin; database: string };
  snapshot: string;
  patterns: string[];
  role: string;
  lockTimeoutMs: number;
  signal: AbortSignal;
}): Promise<void> {
  const dump = start(
    path.join(input.bindir, "pg_dump"),
    [
      "-Fc",
      "-Z0",
      "--data-only",
      "--no-owner",
      "--no-acl",
      `--snapshot=${input.snapshot}`,
      `--lock-wait-timeout=${input.lockTimeoutMs}`,
      ...input.patterns.flatMap((p) => ["-t", p]),
    ],
    connectionEnv(input.source.login, input.source.database),
    input.signal,
  );
  dump.child.stdin!.end();
  const restore = start(
    path.join(input.bindir, "pg_restore"),
    [
      "--no-owner",
      "--no-acl",
      `--role=${input.role}`,
      "--exit-on-error",
      "--section=data",
      "-d",
      input.target.database,
    ],
    connectionEnv(input.target.login, input.target.database),
    input.signal,
  );
  restore.child.stdout!.resume();
  restore.child.stdin!.on("error", () => {});
  dump.child.stdout!.pipe(restore.child.stdin!);
  const kill = () => {
    dump.child.kill("SIGKILL");
    restore.child.kill("SIGKILL");
  };
  await Promise.all([dump.done.catch((err: unknown) => (kill(), Promise.reject(err))), restore.done]).catch(
    (err: unknown) => {
      kill();
      throw err;
    },
  );
}
