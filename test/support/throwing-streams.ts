// Preloaded (`node --import`) into a service process by test/security/job-crash.test.ts: every pg_dump and
// pg_restore the process starts, and every archive it opens, gets a listener that throws, placed first, on every event
// of the child and of each of its streams. Nothing of the job's own code then sees those events, and each throw is an
// exception nothing catches: the service must end that job, not die. Never loaded by the product.
import childProcess, { type ChildProcess } from "node:child_process";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import path from "node:path";
import type { EventEmitter } from "node:events";

const programs = new Set(["pg_dump", "pg_restore"]);
const streamEvents = ["data", "end", "close", "error", "drain", "finish", "open", "ready", "readable"];

function plant(emitter: EventEmitter | null | undefined, name: string, events: string[]): void {
  for (const event of events)
    emitter?.prependListener(event, () => {
      throw new Error(`planted: ${name} ${event}`);
    });
}

const spawn = childProcess.spawn;
childProcess.spawn = function (this: unknown, ...args: unknown[]): ChildProcess {
  const child = (spawn as (...a: unknown[]) => ChildProcess).apply(this, args);
  const program = path.basename(String(args[0]));
  if (programs.has(program)) {
    plant(child, program, ["spawn", "exit", "close", "error"]);
    for (const [i, stream] of [child.stdin, child.stdout, child.stderr].entries())
      plant(stream, `${program} stdio ${i}`, streamEvents);
  }
  return child;
} as typeof childProcess.spawn;

const createReadStream = fs.createReadStream;
fs.createReadStream = function (this: unknown, ...args: unknown[]) {
  const stream = (createReadStream as (...a: unknown[]) => fs.ReadStream).apply(this, args);
  if (String(args[0]).endsWith(".dump")) plant(stream, "archive", streamEvents);
  return stream;
} as typeof fs.createReadStream;

syncBuiltinESMExports();
