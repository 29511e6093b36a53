import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "vite";
import type { TestProject } from "vitest/node";
import { ROOT, startWorker } from "../../bench/lib.ts";
import { startSandboxHost } from "../../scripts/sandbox-host.ts";
import { startFakeLlm } from "../node/fake-llm.ts";

declare module "vitest" {
  export interface ProvidedContext {
    consoleUrl: string;
    /** The same service with API keys required, and its operator token. */
    keyedConsoleUrl: string;
    adminToken: string;
    fakeLlmUrl: string;
  }
}

/** The console built as `npm start` builds it, the service on wrangler dev, the fake model. */
export default async function setup(project: TestProject) {
  await build({ root: join(ROOT, "web"), logLevel: "warn" });
  const scratch = mkdtempSync(join(tmpdir(), "console-test-"));
  const host = await startSandboxHost({ root: join(scratch, "sandboxes") });
  const llm = await startFakeLlm();
  process.env.LLM_API_KEY = "console-test-llm-key-0123456789";
  // The dev server, as `npm start` runs it: it serves the console's static assets.
  const worker = await startWorker(
    8795,
    join(scratch, "state"),
    { LOCAL_SANDBOX_HOST_URL: host.url, LLM_BASE_URL: `${llm.url}/v1`, AGENT_MAX_ITERATIONS: "20" },
    { host: "wrangler-dev" },
  );
  // A second instance with API keys required (secrets reach wrangler through its environment).
  process.env.ADMIN_TOKEN = "console-test-admin-token-0123456789";
  const keyed = await startWorker(
    8796,
    join(scratch, "keyed-state"),
    { AUTH_MODE: "api-key", LOCAL_SANDBOX_HOST_URL: host.url, LLM_BASE_URL: `${llm.url}/v1` },
    { host: "wrangler-dev" },
  );
  project.provide("consoleUrl", worker.url);
  project.provide("keyedConsoleUrl", keyed.url);
  project.provide("adminToken", process.env.ADMIN_TOKEN);
  project.provide("fakeLlmUrl", llm.url);
  return async () => {
    await Promise.all([worker.stop(), keyed.stop(), host.close(), llm.close()]);
    rmSync(scratch, { recursive: true, force: true });
  };
}
