import type { AppConfig } from "../config";
import { LOCAL_USER_ID } from "../config";
import type { SandboxRecord, SandboxStatus } from "../durable-objects/sandbox-do";
import { ApiError } from "../errors";
import { RUNTIME_PORT } from "../sandbox/backend";
import { isApiKeyShaped, presentedKey, resolveApiKey } from "./api-key-service";
import { newHexId, nowIso } from "./ids";
import { decodeCursor, encodeCursor, type Page } from "./paging";
import { PROXY_SESSION_KEY_HEADER, PROXY_USER_HEADER } from "./proxy-headers";
import { defaultSandboxSpec, requireSandboxSpec } from "./sandbox-spec-service";
import { accountOf } from "./user-service";

export interface ExposedUrl {
  name: "AGENT_SERVER" | "WORKER_1" | "WORKER_2";
  url: string;
  port: number;
}

export interface SandboxInfo {
  id: string;
  created_by_user_id: string;
  sandbox_spec_id: string;
  status: SandboxStatus;
  session_api_key: string | null;
  exposed_urls: ExposedUrl[] | null;
  created_at: string;
  updated_at: string;
  status_detail: string | null;
  last_activity_at: string;
}

/** Ports inside the sandbox where the agent may serve an app, exposed as WORKER_1 and WORKER_2. */
export const APP_PORTS = { WORKER_1: 8001, WORKER_2: 8002 } as const;

export function sandboxOf(env: Env, id: string) {
  return env.SANDBOX.getByName(id);
}

/** The URL of a sandbox's runtime through this Worker; `origin` is the API's own origin. */
export function runtimeBaseUrl(origin: string, id: string): string {
  return `${origin}/api/v1/sandboxes/${id}/runtime`;
}

export function toSandboxInfo(record: SandboxRecord, origin: string): SandboxInfo {
  const running = record.status === "RUNNING";
  const base = runtimeBaseUrl(origin, record.id);
  return {
    id: record.id,
    created_by_user_id: record.user_id,
    sandbox_spec_id: record.spec_id,
    status: record.status,
    session_api_key: running ? record.session_api_key : null,
    exposed_urls: running
      ? [
          { name: "AGENT_SERVER", url: base, port: RUNTIME_PORT },
          { name: "WORKER_1", url: `${base}/proxy/${APP_PORTS.WORKER_1}`, port: APP_PORTS.WORKER_1 },
          { name: "WORKER_2", url: `${base}/proxy/${APP_PORTS.WORKER_2}`, port: APP_PORTS.WORKER_2 },
        ]
      : null,
    created_at: record.created_at,
    updated_at: record.updated_at,
    status_detail: record.status_detail,
    last_activity_at: record.last_activity_at,
  };
}

function notFound(): ApiError {
  return new ApiError("SANDBOX_NOT_FOUND", "No sandbox with this id.");
}

function limitReached(config: AppConfig): ApiError {
  return new ApiError(
    "SANDBOX_LIMIT_REACHED",
    `You already have ${config.maxRunningSandboxes} sandboxes running or starting, the most allowed; pause or delete one first.`,
  );
}

/** The caller's sandbox, or a 404 (unknown, deleted, or someone else's: all look the same). */
export async function requireOwnedSandbox(env: Env, userId: string, id: string): Promise<SandboxRecord> {
  const [owned] = await accountOf(env, userId).ownedSandboxes([id]);
  if (owned === undefined) throw notFound();
  const record = await sandboxOf(env, id).get();
  if (record === null || record.user_id !== userId) throw notFound();
  return record;
}

export async function startSandbox(
  env: Env,
  config: AppConfig,
  userId: string,
  specId: string | undefined,
  id: string = newHexId(),
): Promise<SandboxRecord> {
  const spec = specId === undefined ? defaultSandboxSpec() : requireSandboxSpec(specId);
  const account = accountOf(env, userId);
  const admission = await account.admitSandbox(id, nowIso(), config.maxRunningSandboxes);
  if (!admission.admitted) throw limitReached(config);
  try {
    return await sandboxOf(env, id).create({
      id,
      user_id: userId,
      spec,
      session_api_key: `sk_${newHexId()}${newHexId()}`,
      start_timeout_ms: config.sandboxStartTimeoutSeconds * 1000,
      idle_timeout_ms: config.sandboxIdleTimeoutSeconds * 1000,
    });
  } catch (error) {
    await account.forgetSandbox(id);
    throw error;
  }
}

export async function resumeSandbox(env: Env, config: AppConfig, userId: string, id: string): Promise<void> {
  const record = await requireOwnedSandbox(env, userId, id);
  if (record.status === "STARTING" || record.status === "RUNNING") return;
  const admission = await accountOf(env, userId).admitSandbox(id, record.created_at, config.maxRunningSandboxes);
  if (!admission.admitted) throw limitReached(config);
  const result = await sandboxOf(env, id).resume(config.sandboxStartTimeoutSeconds * 1000);
  if (!result.ok) throw result.reason === "not_found" ? notFound() : new ApiError("UPSTREAM_ERROR", result.detail);
}

export async function pauseSandbox(env: Env, userId: string, id: string): Promise<void> {
  await requireOwnedSandbox(env, userId, id);
  const result = await sandboxOf(env, id).pause();
  if (!result.ok) throw result.reason === "not_found" ? notFound() : new ApiError("UPSTREAM_ERROR", result.detail);
}

export async function deleteSandbox(env: Env, userId: string, id: string): Promise<void> {
  await requireOwnedSandbox(env, userId, id);
  const result = await sandboxOf(env, id).destroy();
  if (!result.ok && result.reason !== "not_found") throw new ApiError("UPSTREAM_ERROR", result.detail);
  await accountOf(env, userId).forgetSandbox(id);
}

/** Live records for index rows; rows whose sandbox is gone are repaired away. */
async function liveRecords(env: Env, userId: string, ids: string[]): Promise<Map<string, SandboxRecord>> {
  const records = await Promise.all(ids.map((id) => sandboxOf(env, id).get()));
  const found = new Map<string, SandboxRecord>();
  const account = accountOf(env, userId);
  for (const [i, id] of ids.entries()) {
    const record = records[i];
    if (record && record.user_id === userId) found.set(id, record);
    else await account.forgetSandbox(id);
  }
  return found;
}

export async function searchSandboxes(
  env: Env,
  userId: string,
  status: SandboxStatus | undefined,
  limit: number,
  pageId: string | undefined,
): Promise<Page<SandboxRecord>> {
  const after = pageId === undefined ? null : (decodeCursor(pageId, ["string", "string"]) as [string, string]);
  const account = accountOf(env, userId);
  const rows = await account.searchSandboxes(status ?? null, limit + 1, after);
  const pageRows = rows.slice(0, limit);
  const live = await liveRecords(
    env,
    userId,
    pageRows.map((row) => row.id),
  );
  const items: SandboxRecord[] = [];
  for (const row of pageRows) {
    const record = live.get(row.id);
    if (record === undefined) continue;
    if (record.status !== row.status) await account.recordSandboxStatus(row.id, record.status, record.updated_at);
    if (status === undefined || record.status === status) items.push(record);
  }
  const last = pageRows.at(-1);
  return { items, next_page_id: rows.length > limit && last ? encodeCursor([last.created_at, last.id]) : null };
}

export function countSandboxes(env: Env, userId: string, status: SandboxStatus | undefined): Promise<number> {
  return accountOf(env, userId).countSandboxes(status ?? null);
}

/** In request order; null for ids that are unknown or not the caller's. */
export async function getSandboxes(env: Env, userId: string, ids: string[]): Promise<(SandboxRecord | null)[]> {
  const owned = await accountOf(env, userId).ownedSandboxes([...new Set(ids)]);
  const live = await liveRecords(env, userId, owned);
  return ids.map((id) => live.get(id) ?? null);
}

/**
 * Forwards a request to a sandbox's runtime. The caller proves itself with the sandbox's
 * `session_api_key` (checked by the SandboxDO itself, so the common case costs one hop), or
 * with its owner's API key (resolved here), or in single-user mode as the local user. Another
 * user's key gets the same answer as a wrong key.
 */
export async function proxyToRuntime(
  env: Env,
  config: AppConfig,
  request: Request,
  id: string,
  runtimePath: string,
): Promise<Response> {
  const presented = presentedKey(request.headers);
  const headers = new Headers(request.headers);
  for (const name of ["Authorization", "X-Session-API-Key", PROXY_SESSION_KEY_HEADER, PROXY_USER_HEADER]) headers.delete(name);
  if (config.authMode === "single-user") headers.set(PROXY_USER_HEADER, LOCAL_USER_ID);
  else if (presented === null) throw new ApiError("AUTH_REQUIRED", "Send the sandbox's session_api_key as 'X-Session-API-Key'.");
  else if (isApiKeyShaped(presented)) headers.set(PROXY_USER_HEADER, (await resolveApiKey(env, presented)) ?? "");
  else headers.set(PROXY_SESSION_KEY_HEADER, presented);
  const search = new URL(request.url).search;
  return sandboxOf(env, id).fetch(
    new Request(`http://sandbox${runtimePath}${search}`, { method: request.method, headers, body: request.body }),
  );
}
