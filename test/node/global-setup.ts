import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startSandboxHost } from "../../scripts/sandbox-host.ts";
import { startFakeLlm } from "./fake-llm.ts";
import { startGitServer } from "./git-server.ts";

/**
 * Starts the real local sandbox host, a real git server and the fake OpenAI-compatible model
 * server for the test run; the Worker reaches them over HTTP on 127.0.0.1.
 */
export default async function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), "platform-test-"));
  const host = await startSandboxHost({ root: join(root, "sandboxes") });
  const git = await startGitServer(join(root, "git"), `ghp_fixture${Date.now().toString(36)}Token0123456789`);
  const llm = await startFakeLlm();
  project.provide("sandboxHostUrl", host.url);
  project.provide("fakeLlmUrl", llm.url);
  project.provide("gitServerUrl", git.url);
  project.provide("gitToken", git.token);
  return async () => {
    await Promise.all([host.close(), git.close(), llm.close()]);
    rmSync(root, { recursive: true, force: true });
  };
}
