import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startSandboxHost } from "../../scripts/sandbox-host.ts";

/** Starts the real local sandbox host for the test run; the Worker reaches it over HTTP. */
export default async function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), "sandboxes-"));
  const host = await startSandboxHost({ root });
  project.provide("sandboxHostUrl", host.url);
  return async () => {
    await host.close();
    rmSync(root, { recursive: true, force: true });
  };
}
