import { env } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { expect } from "vitest";

/** The operator token the test configuration binds (vitest.config.ts). */
export const ADMIN_TOKEN = env.ADMIN_TOKEN;
export const BASE = "http://api.test";

export interface CallOptions {
  method?: string;
  key?: string | null;
  body?: unknown;
  rawBody?: string;
  /** A body of any kind (bytes, a stream), sent as it is. */
  rawBodyInit?: BodyInit;
  headers?: Record<string, string>;
}

/** Calls the Worker under test through its real fetch handler. */
export async function call(path: string, options: CallOptions = {}): Promise<Response> {
  const headers = new Headers(options.headers);
  if (options.key) headers.set("Authorization", `Bearer ${options.key}`);
  let body: BodyInit | undefined = options.rawBodyInit;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    if (!headers.has("Content-Type")) headers.set("Content-Type", "application/json");
  }
  return exports.default.fetch(new Request(`${BASE}${path}`, { method: options.method ?? "GET", headers, body }));
}

export async function json<T = unknown>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

/** Asserts the status and the envelope's code, and returns the body. */
export async function expectError(response: Response, status: number, code: string): Promise<{ detail: unknown; code: string }> {
  const body = await json<{ detail: unknown; code: string }>(response);
  expect({ status: response.status, code: body.code }).toEqual({ status, code });
  expect(body.detail).toBeTruthy();
  return body;
}

export interface TestUser {
  id: string;
  key: string;
  keyId: string;
}

let counter = 0;

/** Creates a user through the operator route and returns their first key. */
export async function createUser(name = `user-${++counter}`): Promise<TestUser> {
  const response = await call("/api/v1/admin/users", {
    method: "POST",
    key: ADMIN_TOKEN,
    body: { name, email: `${name}@example.com` },
  });
  expect(response.status).toBe(201);
  const body = await json<{ user: { id: string }; api_key: { id: string; key: string } }>(response);
  return { id: body.user.id, key: body.api_key.key, keyId: body.api_key.id };
}
