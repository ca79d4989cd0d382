// Preloaded (`node --import`) into a service process by test/security/job-crash.test.ts: every pg_dump and
// pg_restore the process starts, and every archive it opens (`*.dump*`), gets a listener that throws, placed first, on every event
// of the child and of each of its streams. Nothing of the job's own code then sees those events, and each throw is an
// exception nothing catches: the service must end that job, not die. Never loaded by the product.
import childProcess, { type ChildProcess } from "node:child_process";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import path from "node:path";
import type { EventEmitter } from "node:events";

const programs = new Set(["pg_dump", "pg_restore"]);
const streamEvents = ["data", "end", "close", "error", "drain", "finish", "open", "ready", "readable"];

/**
 * With MDS_THROW_WHEN set, only while that file exists (the test takes a good backup first), and only on what it lists
 * (comma-separated `event` or `program:event`, the program `pg_dump`, `pg_restore` or `archive`; empty: everything),
 * read when a program or an archive is opened.
 */
function armed(): ((program: string, event: string) => boolean) | undefined {
  const file = process.env.MDS_THROW_WHEN;
  if (!file) return () => true;
  if (!fs.existsSync(file)) return undefined;
  const only = fs.readFileSync(file, "utf8").trim().split(",").filter(Boolean);
  return only.length ? (program, event) => only.includes(event) || only.includes(`${program}:${event}`) : () => true;
}

function plant(emitter: EventEmitter | null | undefined, program: string, name: string, events: string[]): void {
  const on = armed();
  if (!on) return;
  for (const event of events.filter((e) => on(program, e)))
    emitter?.prependListener(event, () => {
      throw new Error(`planted: ${name} ${event}`);
    });
}

const spawn = childProcess.spawn;
childProcess.spawn = function (this: unknown, ...args: unknown[]): ChildProcess {
  const child = (spawn as (...a: unknown[]) => ChildProcess).apply(this, args);
  const program = path.basename(String(args[0]));
  if (programs.has(program)) {
    plant(child, program, program, ["spawn", "exit", "close", "error"]);
    for (const [i, stream] of [child.stdin, child.stdout, child.stderr].entries())
      plant(stream, program, `${program} stdio ${i}`, streamEvents);
  }
  return child;
} as typeof childProcess.spawn;

const createReadStream = fs.createReadStream;
fs.createReadStream = function (this: unknown, ...args: unknown[]) {
  const stream = (createReadStream as (...a: unknown[]) => fs.ReadStream).apply(this, args);
  if (String(args[0]).includes(".dump")) plant(stream, "archive", "archive", streamEvents);
  return stream;
} as typeof fs.createReadStream;

syncBuiltinESMExports();
