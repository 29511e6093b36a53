import { ApiError } from "../errors";
import { newHexId, nowIso, sha256Hex } from "./ids";
import { decodeCursor, encodeCursor, type Page } from "./paging";
import { accountOf } from "./user-service";

/** Keys look like `ohk_` + 43 base62 chars (256 random bits). */
const KEY_PREFIX = "ohk_";
const KEY_BODY = /^ohk_[0-9A-Za-z]{43}$/;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const MAX_API_KEYS_PER_USER = 50;

export interface ApiKeyInfo {
  id: string;
  name: string;
  /** The first characters of the key, enough to recognise it; never the secret part. */
  prefix: string;
  created_at: string;
}

export interface CreatedApiKey extends ApiKeyInfo {
  /** The whole key: shown once, at creation, and never stored. */
  key: string;
}

function generateKey(): string {
  // 62^43 > 2^256; rejection sampling keeps every character uniform.
  let body = "";
  while (body.length < 43) {
    for (const byte of crypto.getRandomValues(new Uint8Array(64))) {
      if (byte < 248 && body.length < 43) body += BASE62[byte % 62];
    }
  }
  return KEY_PREFIX + body;
}

/**
 * Keys carry 256 random bits, so a plain SHA-256 is a safe lookup hash: there is nothing to
 * brute-force that a slow hash would protect.
 */
export function hashApiKey(key: string): Promise<string> {
  return sha256Hex(key);
}

/**
 * The credential a request presents: `Authorization: Bearer`, else `X-Session-API-Key`.
 * Null when it presents none; "" when its Authorization header is not a bearer token, which no
 * key or token matches.
 */
export function presentedKey(headers: Headers): string | null {
  const authorization = headers.get("Authorization");
  if (authorization !== null) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match?.[1] ?? "";
  }
  const sessionKey = headers.get("X-Session-API-Key")?.trim();
  return sessionKey ? sessionKey : null;
}

export function isApiKeyShaped(presented: string): boolean {
  return KEY_BODY.test(presented);
}

/** The owner of a presented key, or null for a malformed, unknown or revoked key. */
export async function resolveApiKey(env: Env, presented: string): Promise<string | null> {
  if (!isApiKeyShaped(presented)) return null;
  const record = await env.API_KEY.getByName(await hashApiKey(presented)).resolve();
  return record?.user_id ?? null;
}

export async function createApiKey(env: Env, userId: string, name: string): Promise<CreatedApiKey> {
  const account = accountOf(env, userId);
  if ((await account.countApiKeys()) >= MAX_API_KEYS_PER_USER) {
    throw new ApiError("API_KEY_LIMIT_REACHED", `A user may hold at most ${MAX_API_KEYS_PER_USER} API keys; revoke one first.`);
  }
  const key = generateKey();
  const keyHash = await hashApiKey(key);
  const info: ApiKeyInfo = { id: newHexId(), name, prefix: key.slice(0, 12), created_at: nowIso() };
  // The key object first (it is what authenticates), then the account's index row.
  const registered = await env.API_KEY.getByName(keyHash).register({
    key_id: info.id,
    user_id: userId,
    created_at: info.created_at,
  });
  if (!registered) throw new Error("API key hash collision");
  await account.addApiKey({ ...info, key_hash: keyHash });
  return { ...info, key };
}

export async function listApiKeys(
  env: Env,
  userId: string,
  limit: number,
  pageId: string | undefined,
): Promise<Page<ApiKeyInfo>> {
  const after = pageId === undefined ? null : (decodeCursor(pageId, ["string", "string"]) as [string, string]);
  const rows = await accountOf(env, userId).listApiKeys(limit + 1, after);
  const items = rows.slice(0, limit).map(({ id, name, prefix, created_at }) => ({ id, name, prefix, created_at }));
  const last = items.at(-1);
  return { items, next_page_id: rows.length > limit && last ? encodeCursor([last.created_at, last.id]) : null };
}

/** Revokes one of the caller's keys; 404 for an unknown id or another user's key. */
export async function revokeApiKey(env: Env, userId: string, keyId: string): Promise<void> {
  const account = accountOf(env, userId);
  const row = await account.getApiKey(keyId);
  if (row === null) throw new ApiError("API_KEY_NOT_FOUND", "No API key with this id.");
  // Authentication stops first; the index row goes after, so a retry after a failure completes it.
  await env.API_KEY.getByName(row.key_hash).revoke();
  await account.deleteApiKey(keyId);
}
