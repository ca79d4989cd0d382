import { configDefaults, defineConfig } from "vitest/config";

// Tests start real PostgreSQL servers, the service, devkube and kubectl: give them room,
// and keep parallelism at the machine's two cores.
export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "packages/*/src/**/*.test.ts", "dev/**/*.test.ts", "test/**/*.test.ts"],
    // test/image/ builds and runs the container image (minutes): `npm run test:image`, see vitest.image.config.ts.
    exclude: [...configDefaults.exclude, "test/image/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // Fails the run when a server a test started outlives it (and stops it): test/support/leak-check.ts.
    globalSetup: ["./test/support/leak-check.ts"],
    setupFiles: ["./test/support/leak-check-file.ts"],
  },
});
