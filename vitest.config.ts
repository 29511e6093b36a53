import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          AUTH_MODE: "api-key",
          ADMIN_TOKEN: "test-admin-token-0123456789",
          LLM_API_KEY: "",
        },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    // The Worker's one-line-per-request logs drown the test report; errors still show.
    onConsoleLog: (log) => !log.includes('"msg":"request"'),
  },
});
