// `mds <command>`: each command lives in its own module, loaded only when used so that
// `mds token` does not pay for the operator.
import { mdsVersion } from "../operator/build-info.ts";

export interface Command {
  summary: string;
  run: (argv: string[]) => Promise<number>;
}

// The product's commands: what the image runs. The development commands (`mds dev`, `mds devkube`) live outside
// src/ and only a source checkout's bin/mds.js adds them: the image compiles src/ alone.
const productCommands: Record<string, Command> = {
  operator: {
    summary: "run the operator against the current kubeconfig or in-cluster config",
    run: async (a) => {
      // V8's heap flags before the operator's modules load and allocate (see heap-flags.ts).
      (await import("./heap-flags.ts")).limitHeapGrowth();
      return (await import("./operator.ts")).runOperator(a);
    },
  },
  service: {
    summary: "run the Managed Database Service API",
    run: async (a) => {
      // Before the service's modules load and allocate (see heap-flags.ts).
      (await import("./heap-flags.ts")).serviceHeapFlags();
      return (await import("./service.ts")).runService(a);
    },
  },
  token: {
    summary: "create, list and revoke service tokens",
    run: async (a) => (await import("./token.ts")).runToken(a),
  },
  webhook: {
    summary: "serve the CRD conversion webhook (v1alpha1 <-> v1beta1) with a certificate it manages",
    run: async (a) => (await import("./webhook.ts")).runWebhook(a),
  },
  "migrate-storage": {
    summary: "rewrite every mds.dev object in the CRDs' storage version and drop the others from storedVersions",
    run: async (a) => (await import("./migrate-storage.ts")).runMigrateStorage(a),
  },
  crds: {
    summary: "write crds/*.yaml from the resource schemas",
    run: async (a) => (await import("./crds.ts")).runCrds(a),
  },
  "prepare-rollback": {
    summary: "before rolling the operator back to a release older than 0.2.0: drop the conditions it does not know",
    run: async (a) => (await import("./prepare-rollback.ts")).runPrepareRollback(a),
  },
};

// Named so that `mds dev` in the image says where to run it instead of "unknown command".
const developmentCommands = ["dev", "devkube"];

/** `mds --help`: the product's commands, after `devCommands` (those a source checkout adds, bin/mds.js). */
export function usage(devCommands: Record<string, Command> = {}): string {
  const commands = { ...devCommands, ...productCommands };
  const available = Object.entries(commands);
  const width = Math.max(...available.map(([name]) => name.length));
  const lines = available.map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    "usage: mds <command> [options]",
    "",
    "commands:",
    ...lines,
    "",
    "Run `mds <command> --help` for a command's options; `mds --version` prints the version.",
  ].join("\n");
}

/** Runs `mds <argv>`; `devCommands`: the development commands a source checkout adds (bin/mds.js). */
export async function main(argv: string[], devCommands: Record<string, Command> = {}): Promise<number> {
  const commands = { ...devCommands, ...productCommands };
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    console.log(usage(devCommands));
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v" || name === "version") {
    console.log(mdsVersion());
    return 0;
  }
  const command = commands[name];
  if (!command && developmentCommands.includes(name)) {
    console.error(
      `mds: "${name}" is a development and test tool and is not in this image (the production image leaves devkube out); run it from a source checkout (npm start, or node bin/mds.js ${name})`,
    );
    return 2;
  }
  if (!command) {
    console.error(`mds: unknown command "${name}"\n\n${usage(devCommands)}`);
    return 2;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    if (!commandModuleMissing(err, name)) throw err;
    console.error(
      `mds: "${name}" is not in this image: the operator image holds \`mds operator\` and \`mds webhook\` (scripts/image/operator-app.ts); the service image holds every command`,
    );
    return 2;
  }
}

// The operator image leaves out the other commands' modules (scripts/image/operator-app.ts): the command's own module
// is missing, not a package it imports (that would be a broken image, and is rethrown).
function commandModuleMissing(err: unknown, name: string): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === "ERR_MODULE_NOT_FOUND" && String(e.message).includes(`/cli/${name}.js'`);
}
