import { defineConfig } from "vitest/config";

// Browser tests: the web console in headless Chromium (Debian's package, driven by
// playwright-core) against the local service (wrangler dev) with the fake model.
export default defineConfig({
  test: {
    include: ["test/browser/**/*.test.ts"],
    environment: "node",
    globalSetup: ["./test/browser/global-setup.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
