// feed() must finish when the child it writes to has exited before reading everything (pg_restore --list stops
// after the table of contents): the whole input is still consumed, and nothing waits for a 'drain' that never comes.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { expect, it } from "vitest";
import { feed } from "./dump.ts";

it("consumes all input and returns when the reading child exited first", async () => {
  const child = spawn("true", [], { stdio: ["pipe", "ignore", "ignore"] });
  await once(child, "exit");
  // Node destroys the stdin of an exited child without emitting 'error'.
  await new Promise((r) => setImmediate(r));
  let consumed = 0;
  async function* chunks() {
    for (let i = 0; i < 64; i++) {
      consumed++;
      yield Buffer.alloc(1024 * 1024);
    }
  }
  const outcome = await Promise.race([
    feed(chunks(), child.stdin!).then(() => "returned"),
    new Promise((r) => setTimeout(r, 10_000, "hung")),
  ]);
  expect({ outcome, consumed }).toEqual({ outcome: "returned", consumed: 64 });
});
