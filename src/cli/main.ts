// `mds <command>`: each command lives in its own module, loaded only when used so that
// `mds token` does not pay for devkube or the operator.
import { existsSync, readFileSync } from "node:fs";

interface Command {
  summary: string;
  run: (argv: string[]) => Promise<number>;
  /** A development and test tool that runs devkube: the container image leaves devkube's code out. */
  devOnly?: true;
}

const commands: Record<string, Command> = {
  dev: {
    summary: "run the whole local stack: PostgreSQL, service, devkube, operator (npm start)",
    devOnly: true,
    run: async (a) => (await import("./dev.ts")).runDev(a),
  },
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
    run: async (a) => (await import("./service.ts")).runService(a),
  },
  token: {
    summary: "create, list and revoke service tokens",
    run: async (a) => (await import("./token.ts")).runToken(a),
  },
  devkube: {
    summary: "run devkube, the Kubernetes-compatible development server",
    devOnly: true,
    run: async (a) => (await import("./devkube.ts")).runDevkube(a),
  },
  crds: {
    summary: "write crds/*.yaml from the resource schemas",
    run: async (a) => (await import("./crds.ts")).runCrds(a),
  },
};

// The production image removes devkube/ and the CLI modules that start it (deploy/image/dev-only.txt); the same
// relative path holds in src/ (a checkout) and dist/ (the image), so its absence tells which build this is.
function devkubeIncluded(): boolean {
  return existsSync(new URL("../devkube/", import.meta.url));
}

// package.json sits two levels up both from src/cli/ (a checkout) and from /app/dist/cli/ (the image).
export function version(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string })
    .version;
}

export function usage(): string {
  const available = Object.entries(commands).filter(([, c]) => !c.devOnly || devkubeIncluded());
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

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v" || name === "version") {
    console.log(version());
    return 0;
  }
  const command = commands[name];
  if (!command) {
    console.error(`mds: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  if (command.devOnly && !devkubeIncluded()) {
    console.error(
      `mds: "${name}" is a development and test tool and is not in this image (the production image leaves devkube out); run it from a source checkout (npm start, or node bin/mds.js ${name})`,
    );
    return 2;
  }
  return command.run(rest);
}
