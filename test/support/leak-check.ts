// vitest's globalSetup: a test run fails when a server it started outlives it. Each run marks its environment with
// a run id before any worker starts; every process the tests spawn (PostgreSQL, PgBouncer, Prometheus, kubectl …)
// inherits it, whoever's child it became since. At teardown, after every worker has exited, a process that still
// carries this run's id was left behind by a test that did not stop what it started: the run names each one with
// its command line, stops it (it is this run's own) and fails. Other engineers' runs on the same machine carry
// other ids, so they are neither blamed nor touched.
import { randomUUID } from "node:crypto";
import { readFile, readdir, readlink } from "node:fs/promises";

/** The environment variable that marks the processes of one test run. */
export const runMarker = "MDS_TEST_RUN";
/** The one that names the test file a process was started from (leak-check-file.ts sets it in each file). */
export const fileMarker = "MDS_TEST_FILE";

export interface Leftover {
  pid: number;
  command: string;
}

/** Processes other than `exclude` whose environment carries `id` under runMarker. */
export async function processesOfRun(id: string, exclude: Set<number>): Promise<Leftover[]> {
  const needle = Buffer.from(`${runMarker}=${id}\0`);
  const found: Leftover[] = [];
  for (const entry of await readdir("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || exclude.has(pid)) continue;
    try {
      const environ = await readFile(`/proc/${pid}/environ`);
      if (!environ.includes(needle)) continue;
      let command = (await readFile(`/proc/${pid}/cmdline`, "utf8")).replaceAll("\0", " ").trim();
      // vitest's own processes (its watchdog may outlive the workers by a moment) are its business.
      if (/^vitest-|\/node_modules\/vitest\//.test(command)) continue;
      command ||= await readlink(`/proc/${pid}/exe`).catch(() => "?");
      const file = environ
        .toString("utf8")
        .split("\0")
        .find((v) => v.startsWith(`${fileMarker}=`));
      found.push({
        pid,
        command: file === undefined ? command : `${command} (started by ${file.slice(fileMarker.length + 1)})`,
      });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  // PostgreSQL's backends carry the mark too: name the postmasters (or what has no parent among them) only.
  const pids = new Set(found.map((f) => f.pid));
  const parents = await Promise.all(found.map((f) => parentOf(f.pid)));
  return found.filter((_, i) => !pids.has(parents[i] ?? -1));
}

async function parentOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ")".
  const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  return Number.isInteger(ppid) ? ppid : undefined;
}

export default function setup(): () => Promise<void> {
  const id = randomUUID();
  process.env[runMarker] = id;
  return async () => {
    // The main vitest process and its own ancestors carry no mark of this run; only what was spawned after it.
    const leftovers = await processesOfRun(id, new Set([process.pid]));
    if (leftovers.length === 0) return;
    for (const l of leftovers) {
      try {
        // SIGQUIT: PostgreSQL's immediate shutdown; PgBouncer and the rest exit on it too.
        process.kill(l.pid, "SIGQUIT");
      } catch {
        // Already gone.
      }
    }
    throw new Error(
      `the test run left ${leftovers.length} process(es) running that its tests started (stopped now): a test does not stop what it starts:\n${leftovers.map((l) => `  ${l.pid} ${l.command}`).join("\n")}`,
    );
  };
}
