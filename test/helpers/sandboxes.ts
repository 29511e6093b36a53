import { env } from "cloudflare:test";
import { expect } from "vitest";
import { call, json } from "./api";

export interface SandboxInfo {
  id: string;
  created_by_user_id: string;
  sandbox_spec_id: string;
  status: string;
  session_api_key: string | null;
  exposed_urls: { name: string; url: string; port: number }[] | null;
  status_detail: string | null;
  created_at: string;
  updated_at: string;
  last_activity_at: string;
}

export async function startSandbox(key: string, specId?: string): Promise<Response> {
  const query = specId === undefined ? "" : `?sandbox_spec_id=${specId}`;
  return call(`/api/v1/sandboxes${query}`, { method: "POST", key });
}

export async function getSandbox(key: string, id: string): Promise<SandboxInfo | null> {
  const response = await call(`/api/v1/sandboxes?id=${id}`, { key });
  expect(response.status).toBe(200);
  const [info] = await json<(SandboxInfo | null)[]>(response);
  return info ?? null;
}

/** Polls until the sandbox reaches one of `statuses`; fails with its last state otherwise. */
export async function waitForStatus(key: string, id: string, statuses: string[], timeoutMs = 20_000): Promise<SandboxInfo> {
  const deadline = Date.now() + timeoutMs;
  let last: SandboxInfo | null = null;
  while (Date.now() < deadline) {
    last = await getSandbox(key, id);
    if (last !== null && statuses.includes(last.status)) return last;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`sandbox ${id} did not reach ${statuses.join("/")}: ${JSON.stringify(last)}`);
}

/** Starts a sandbox and waits until it is RUNNING. */
export async function runningSandbox(key: string, specId?: string): Promise<SandboxInfo> {
  const response = await startSandbox(key, specId);
  expect(response.status).toBe(200);
  const info = await json<SandboxInfo>(response);
  return waitForStatus(key, info.id, ["RUNNING"]);
}

/** A call to the sandbox's runtime through the Worker's proxy, with its session key. */
export function runtime(
  info: SandboxInfo,
  path: string,
  init: { method?: string; body?: BodyInit; sessionKey?: string | null; json?: unknown } = {},
) {
  const headers: Record<string, string> = {};
  const sessionKey = init.sessionKey === undefined ? info.session_api_key : init.sessionKey;
  if (sessionKey) headers["X-Session-API-Key"] = sessionKey;
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers["Content-Type"] = "application/json";
  }
  return call(`/api/v1/sandboxes/${info.id}/runtime${path}`, { method: init.method ?? "GET", headers, rawBodyInit: body });
}

/** What the local sandbox host knows of a sandbox's process and directory. */
export async function hostState(id: string): Promise<{ running: boolean; url: string | null; directory_exists: boolean }> {
  const response = await fetch(`${env.LOCAL_SANDBOX_HOST_URL}/sandboxes/${id}`);
  return (await response.json()) as { running: boolean; url: string | null; directory_exists: boolean };
}

export async function killRuntime(id: string): Promise<void> {
  await fetch(`${env.LOCAL_SANDBOX_HOST_URL}/sandboxes/${id}/kill`, { method: "POST" });
}
