#!/usr/bin/env node
// The `mds` command of a source checkout. Node 24 runs the TypeScript sources directly (type stripping); the
// container image runs deploy/image/mds.js over the compiled dist/ instead, without the development commands
// (`mds dev`, `mds devkube`: dev/commands.ts) this one adds.
import { main } from "../src/cli/main.ts";
import { devCommands } from "../dev/commands.ts";

main(process.argv.slice(2), devCommands).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    console.error(`mds: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
