import { defineConfig } from "vitest/config";

// `npm run test:image`: builds the image with scripts/build-image.sh and runs it in podman (test/image/). Not part of
// `npm test`: the build alone takes about two minutes with the Debian base cached, four without.
export default defineConfig({
  test: {
    include: ["test/image/**/*.test.ts"],
    testTimeout: 300_000,
    hookTimeout: 20 * 60_000,
    pool: "forks",
    maxWorkers: 1,
    reporters: ["default", "./test/support/summary-reporter.ts"],
    // As in vitest.config.ts: a server the tests started must not outlive the run.
    globalSetup: ["./test/support/leak-check.ts"],
    setupFiles: ["./test/support/leak-check-file.ts"],
  },
});
