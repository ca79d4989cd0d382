// `mds <command>`: each command lives in its own module, loaded only when used so that
// `mds token` does not pay for devkube or the operator.
const commands: Record<string, { summary: string; run: (argv: string[]) => Promise<number> }> = {
  dev: { summary: "run the whole local stack: PostgreSQL, service, devkube, operator (npm start)", run: async (a) => (await import("./dev.ts")).runDev(a) },
  operator: { summary: "run the operator against the current kubeconfig or in-cluster config", run: async (a) => {
      // V8's heap flags before the operator's modules load and allocate (see heap-flags.ts).
      (await import("./heap-flags.ts")).limitHeapGrowth();
      return (await import("./operator.ts")).runOperator(a);
    },
  },
  service: { summary: "run the Managed Database Service API", run: async (a) => (await import("./service.ts")).runService(a) },
  token: { summary: "create, list and revoke service tokens", run: async (a) => (await import("./token.ts")).runToken(a) },
  devkube: { summary: "run devkube, the Kubernetes-compatible development server", run: async (a) => (await import("./devkube.ts")).runDevkube(a) },
  crds: { summary: "write crds/*.yaml from the resource schemas", run: async (a) => (await import("./crds.ts")).runCrds(a) },
};

export function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return ["usage: mds <command> [options]", "", "commands:", ...lines, "", "Run `mds <command> --help` for a command's options."].join("\n");
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (!command) {
    console.error(`mds: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return command.run(rest);
}
