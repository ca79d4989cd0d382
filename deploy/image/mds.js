#!/usr/bin/env node
// The `mds` command inside the container image: the same dispatcher as bin/mds.js, run from the compiled dist/
// (see the Dockerfile for why the image runs compiled JavaScript).
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === "number") process.exitCode = code; },
  (err) => { console.error(`mds: ${err instanceof Error ? err.message : String(err)}`); process.exitCode = 1; },
);
