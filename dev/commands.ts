import type { Command } from "../src/cli/main.ts";

// The development commands a source checkout adds to `mds` (bin/mds.js passes them to main()). They start devkube,
// which the production image does not contain: the image compiles src/ alone and runs deploy/image/mds.js, which
// knows nothing of this file.
export const devCommands: Record<string, Command> = {
  dev: {
    summary: "run the whole local stack: PostgreSQL, service, devkube, operator (npm start)",
    run: async (a) => (await import("./dev.ts")).runDev(a),
  },
  devkube: {
    summary: "run devkube, the Kubernetes-compatible development server",
    run: async (a) => (await import("@mds/devkube/cli")).runDevkube(a),
  },
};
