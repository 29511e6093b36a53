import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    cloudflareTest(({ inject }) => ({
      // The Worker plus a test-only SandboxDO whose ctx.container is a stand-in (test/worker.ts).
      main: "./test/worker.ts",
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          AUTH_MODE: "api-key",
          ADMIN_TOKEN: "test-admin-token-0123456789",
          LLM_API_KEY: "test-llm-key-0123456789",
          LLM_BASE_URL: `${inject("fakeLlmUrl")}/v1`,
          LLM_MODEL: "openai/unscripted",
          AGENT_MAX_ITERATIONS: "8",
          EVENT_STREAM_HEARTBEAT_SECONDS: "0.5",
          EVENT_STREAM_CLIENT_BUFFER_BYTES: "65536",
          FAKE_LLM_URL: inject("fakeLlmUrl"),
          LOCAL_SANDBOX_HOST_URL: inject("sandboxHostUrl"),
          SANDBOX_START_TIMEOUT_SECONDS: "20",
          PROVIDER_TOKEN_KEY: "test-provider-token-key-0123456789",
          GITHUB_BASE_URL: inject("gitServerUrl"),
          GITLAB_BASE_URL: inject("gitServerUrl"),
          TEST_GIT_TOKEN: inject("gitToken"),
        },
        durableObjects: {
          STANDIN_CONTAINER_SANDBOX: { className: "StandInContainerSandboxDO", useSQLite: true },
        },
      },
    })),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    // The browser tests run in Node against wrangler dev (vitest.browser.config.ts), and the
    // runtime's unit tests in Node (vitest.runtime.config.ts).
    exclude: ["test/browser/**", "test/runtime/**"],
    globalSetup: ["./test/node/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The Worker's one-line-per-request logs drown the test report; errors still show.
    onConsoleLog: (log) => !log.includes('"msg":"request"'),
  },
});
