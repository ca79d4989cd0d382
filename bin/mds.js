#!/usr/bin/env node
// The `mds` command. Node 24 runs the TypeScript sources directly (type stripping);
// the container image runs the same entry point from the compiled dist/ instead.
import { main } from "../src/cli/main.ts";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    console.error(`mds: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
